"""Launch the mbfg_ros estimator node on a mechanism.

    ros2 launch mbfg_ros estimator.launch.py mechanism:=/path/to/robot.yaml \
        command_topic:=/effort_controller/commands
    # live replay of a recorded bag: ros2 bag play --clock BAG  +  use_sim_time:=true
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare


def generate_launch_description():
    share = FindPackageShare('mbfg_ros')
    return LaunchDescription([
        DeclareLaunchArgument(
            'mechanism', default_value=PathJoinSubstitution([share, 'config', 'fourbar.yaml']),
            description='Mechanism YAML (joints, actuators, IMUs); default: the four-bar example'),
        DeclareLaunchArgument(
            'params_file',
            default_value=PathJoinSubstitution([share, 'config', 'estimator.yaml']),
            description='ROS parameters file of the estimator node (rates, noise, gains)'),
        DeclareLaunchArgument(
            'namespace', default_value='',
            description='Namespace of the node and of its relative topics (joint_states, imu/*)'),
        DeclareLaunchArgument(
            'use_sim_time', default_value='false',
            description='Tick on /clock (true with `ros2 bag play --clock` or the simulator)'),
        DeclareLaunchArgument(
            'command_topic', default_value='~/torque_commands',
            description='Where torque commands go, e.g. /effort_controller/commands '
                        '(a forward_command_controller with interface_name: effort)'),
        Node(
            package='mbfg_ros', executable='estimator_node', name='estimator_node',
            namespace=LaunchConfiguration('namespace'), output='screen',
            parameters=[LaunchConfiguration('params_file'), {
                'mechanism': LaunchConfiguration('mechanism'),
                'use_sim_time': ParameterValue(LaunchConfiguration('use_sim_time'),
                                               value_type=bool),
            }],
            remappings=[('~/torque_commands', LaunchConfiguration('command_topic'))]),
    ])
