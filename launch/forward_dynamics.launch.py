"""Launch the mbfg_ros simulator: factor-graph forward dynamics publishing sensor data.

    ros2 launch mbfg_ros forward_dynamics.launch.py duration:=5.0 output:=fourbar_bag
    ros2 launch mbfg_ros forward_dynamics.launch.py realtime:=false   # as fast as possible
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution, PythonExpression
from launch_ros.actions import Node
from launch_ros.descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare


def generate_launch_description():
    share = FindPackageShare('mbfg_ros')
    output = LaunchConfiguration('output')
    return LaunchDescription([
        DeclareLaunchArgument(
            'mechanism', default_value=PathJoinSubstitution([share, 'config', 'fourbar.yaml']),
            description='Mechanism YAML to simulate; default: the four-bar example'),
        DeclareLaunchArgument(
            'duration', default_value='5.0',
            description='Simulated seconds before the node exits (0: run until stopped)'),
        DeclareLaunchArgument('dt', default_value='0.001',
                              description='Integration time step, s'),
        DeclareLaunchArgument('window', default_value='2',
                              description='States in the fixed-lag integration window (>= 2)'),
        DeclareLaunchArgument(
            'output', default_value='',
            description='rosbag2 directory to record everything published to (empty: none)'),
        DeclareLaunchArgument(
            'realtime', default_value='true',
            description='true: pace on the clock; false: as fast as possible, publishing /clock'),
        Node(
            package='mbfg_ros', executable='simulator_node', name='simulator_node',
            output='screen',
            parameters=[{
                'mechanism': LaunchConfiguration('mechanism'),
                'duration': ParameterValue(LaunchConfiguration('duration'), value_type=float),
                'dt': ParameterValue(LaunchConfiguration('dt'), value_type=float),
                'window': ParameterValue(LaunchConfiguration('window'), value_type=int),
                'realtime': ParameterValue(LaunchConfiguration('realtime'), value_type=bool),
                'output': output,
                'record': ParameterValue(PythonExpression(["'", output, "' != ''"]),
                                         value_type=bool),
            }]),
    ])
