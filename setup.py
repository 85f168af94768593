from glob import glob

from setuptools import find_packages, setup

package_name = 'mbfg_ros'

setup(
    name=package_name,
    version='0.1.0',
    packages=find_packages(exclude=['test', 'test.*', 'bench']),
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
        ('share/' + package_name + '/launch', glob('launch/*.launch.py')),
        ('share/' + package_name + '/config',
         glob('config/*.yaml') + glob('config/*.txt') + glob('config/*.md')),
        ('share/' + package_name + '/config/urdf',
         glob('config/urdf/*.urdf') + glob('config/urdf/*.yaml') + glob('config/urdf/*.md')
         + glob('config/urdf/*.py')),
    ],
    install_requires=['setuptools', 'numpy', 'pyyaml'],
    extras_require={'test': ['pytest', 'scipy']},
    zip_safe=True,
    maintainer='mbfg_ros developers',
    maintainer_email='dev@example.com',
    description='Factor-graph multibody dynamics: simulate, estimate, inverse dynamics, '
                'ROS 2 nodes',
    license='BSD-3-Clause',
    entry_points={
        'console_scripts': [
            'mbfg-simulate = mbfg_ros.cli.simulate:main',
            'mbfg-inverse = mbfg_ros.cli.inverse:main',
            'mbfg-statics = mbfg_ros.cli.statics:main',
            'mbfg-replay = mbfg_ros.cli.replay:main',
            'mbfg-identify = mbfg_ros.cli.identify:main',
            'estimator_node = mbfg_ros.ros.estimator_node:main',
            'simulator_node = mbfg_ros.ros.simulator_node:main',
            'floating_estimator_node = mbfg_ros.ros.floating_node:main',
        ],
    },
)
