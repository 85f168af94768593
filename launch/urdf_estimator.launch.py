"""Launch the mbfg_ros estimator on a URDF robot, with robot_state_publisher showing the
estimate.

    ros2 launch mbfg_ros urdf_estimator.launch.py urdf:=/path/to/robot.urdf \
        overlay:=/path/to/robot_sensors.yaml command_topic:=/effort_controller/commands

The URDF file is read into the ``robot_description`` parameter of both nodes (the usual
ROS way; a ``.xacro`` must be expanded first: ``xacro robot.urdf.xacro > robot.urdf``).
The overlay YAML adds what a URDF does not hold: IMUs (link, mounting, topic), loop-closing
joints, actuators, gravity. robot_state_publisher reads ``estimator_node/joint_states``
(the estimated q, q̇, τ̂ with the URDF joint names), so RViz shows the estimated robot.
"""
from pathlib import Path

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare


def _nodes(context):
    urdf = Path(LaunchConfiguration('urdf').perform(context))
    description = urdf.read_text()          # a missing file fails here, naming it
    sim_time = ParameterValue(LaunchConfiguration('use_sim_time'), value_type=bool)
    return [
        Node(
            package='mbfg_ros', executable='estimator_node', name='estimator_node',
            namespace=LaunchConfiguration('namespace'), output='screen',
            parameters=[LaunchConfiguration('params_file'), {
                'robot_description': description,
                'overlay': LaunchConfiguration('overlay'),
                'use_sim_time': sim_time,
            }],
            remappings=[('~/torque_commands', LaunchConfiguration('command_topic'))]),
        Node(
            package='robot_state_publisher', executable='robot_state_publisher',
            name='estimate_state_publisher', namespace=LaunchConfiguration('namespace'),
            output='screen', condition=IfCondition(LaunchConfiguration('state_publisher')),
            parameters=[{'robot_description': description, 'use_sim_time': sim_time}],
            remappings=[('joint_states', 'estimator_node/joint_states')]),
    ]


def generate_launch_description():
    share = FindPackageShare('mbfg_ros')
    return LaunchDescription([
        DeclareLaunchArgument(
            'urdf', default_value=PathJoinSubstitution([share, 'config', 'urdf', 'ur5.urdf']),
            description='URDF file of the robot; default: the bundled UR5'),
        DeclareLaunchArgument(
            'overlay',
            default_value=PathJoinSubstitution([share, 'config', 'urdf', 'ur5_sensors.yaml']),
            description='Overlay YAML: IMUs, loop joints, actuators, limits, gravity, q0 '
                        '(empty for none); default: the UR5 wrist IMU'),
        DeclareLaunchArgument(
            'params_file',
            default_value=PathJoinSubstitution([share, 'config', 'estimator_urdf.yaml']),
            description='ROS parameters file of the estimator node (rates, noise, gains)'),
        DeclareLaunchArgument(
            'namespace', default_value='',
            description='Namespace of the nodes and of their relative topics (joint_states, '
                        'imu/*)'),
        DeclareLaunchArgument(
            'use_sim_time', default_value='false',
            description='Tick on /clock (true with `ros2 bag play --clock` or the simulator)'),
        DeclareLaunchArgument(
            'command_topic', default_value='~/torque_commands',
            description='Where torque commands go, e.g. /effort_controller/commands '
                        '(a forward_command_controller with interface_name: effort)'),
        DeclareLaunchArgument(
            'state_publisher', default_value='true',
            description='Start robot_state_publisher on the estimated joint states (TF for '
                        'RViz)'),
        OpaqueFunction(function=_nodes),
    ])
