"""Closed-loop demo: simulator -> estimator -> torque commands -> simulator (four-bar).

    ros2 launch mbfg_ros demo.launch.py
    ros2 topic echo /estimator_node/state
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare


def generate_launch_description():
    share = FindPackageShare('mbfg_ros')
    mechanism = LaunchConfiguration('mechanism')
    return LaunchDescription([
        DeclareLaunchArgument(
            'mechanism', default_value=PathJoinSubstitution([share, 'config', 'fourbar.yaml']),
            description='Mechanism YAML shared by simulator and estimator (default: four-bar)'),
        DeclareLaunchArgument(
            'duration', default_value='0.0',
            description='Simulated seconds before the simulator exits (0: run until stopped)'),
        DeclareLaunchArgument(
            'feedback', default_value='/simulator_node/torque_commands',
            description='Topic the estimator torque commands go to (the simulator input)'),
        Node(
            package='mbfg_ros', executable='simulator_node', name='simulator_node',
            output='screen',
            parameters=[{
                'mechanism': mechanism,
                'duration': ParameterValue(LaunchConfiguration('duration'), value_type=float),
                'realtime': True, 'publish_rate': 100.0, 'encoder_resolution': 0.0015,
                'encoder_sigma': 0.002, 'gyro_sigma': 0.01, 'accel_sigma': 0.05,
            }]),
        Node(
            package='mbfg_ros', executable='estimator_node', name='estimator_node',
            output='screen',
            parameters=[PathJoinSubstitution([share, 'config', 'estimator.yaml']),
                        {'mechanism': mechanism}],
            remappings=[('~/torque_commands', LaunchConfiguration('feedback'))]),
    ])
