"""Launch the mbfg_ros floating-base estimator on a legged robot (issue 28), with
robot_state_publisher showing the estimated legs.

    ros2 launch mbfg_ros floating_estimator.launch.py            # the bundled Solo-12
    ros2 launch mbfg_ros floating_estimator.launch.py urdf:=/path/robot.urdf \\
        overlay:=/path/robot_floating.yaml params_file:=/path/robot_estimator.yaml

The URDF file is read into the ``robot_description`` parameter of both nodes. The overlay
names the free base and the feet (``floating_base: true``, ``base_link``, ``contacts``);
the parameters file the topics, frames and the estimator's settings
(config/solo12_estimator.yaml: the simulated Solo-12's bags). The node publishes
``~/odom`` and the odom → base_link TF; robot_state_publisher reads
``floating_estimator_node/joint_states`` (the estimated q, q̇, τ̂), so RViz shows the
estimated robot on the estimated base.
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
            package='mbfg_ros', executable='floating_estimator_node',
            name='floating_estimator_node', namespace=LaunchConfiguration('namespace'),
            output='screen',
            parameters=[LaunchConfiguration('params_file'), {
                'robot_description': description,
                'overlay': LaunchConfiguration('overlay'),
                'use_sim_time': sim_time,
            }]),
        Node(
            package='robot_state_publisher', executable='robot_state_publisher',
            name='estimate_state_publisher', namespace=LaunchConfiguration('namespace'),
            output='screen', condition=IfCondition(LaunchConfiguration('state_publisher')),
            parameters=[{'robot_description': description, 'use_sim_time': sim_time}],
            remappings=[('joint_states', 'floating_estimator_node/joint_states')]),
    ]


def generate_launch_description():
    share = FindPackageShare('mbfg_ros')
    return LaunchDescription([
        DeclareLaunchArgument(
            'urdf', default_value=PathJoinSubstitution([share, 'config', 'urdf',
                                                        'solo12.urdf']),
            description='URDF file of the legged robot; default: the bundled Solo-12'),
        DeclareLaunchArgument(
            'overlay', default_value=PathJoinSubstitution([share, 'config', 'urdf',
                                                           'solo12_floating.yaml']),
            description='Overlay YAML: floating_base: true, base_link, contacts (the feet); '
                        'default: Solo-12\'s'),
        DeclareLaunchArgument(
            'params_file',
            default_value=PathJoinSubstitution([share, 'config', 'solo12_estimator.yaml']),
            description='ROS parameters file of the node (topics, frames, rates, the '
                        'estimator\'s settings)'),
        DeclareLaunchArgument(
            'namespace', default_value='',
            description='Namespace of the nodes and of their relative topics (joint_states, '
                        'imu, feet/*)'),
        DeclareLaunchArgument(
            'use_sim_time', default_value='false',
            description='Use /clock (true with `ros2 bag play --clock` or a simulator)'),
        DeclareLaunchArgument(
            'state_publisher', default_value='true',
            description='Start robot_state_publisher on the estimated joint states (TF of '
                        'the legs for RViz)'),
        OpaqueFunction(function=_nodes),
    ])
