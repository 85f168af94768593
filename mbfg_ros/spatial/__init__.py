"""Spatial robots (URDF): seed 002's factor graphs, seed 004's tree recursions."""
