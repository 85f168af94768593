"""The floating-base estimator (issue 28 item 3): base pose and twist of a legged robot from
its base IMU, joint encoders and efforts, and the feet's contacts (:mod:`.estimator`)."""
from .config import CONTACT_SOURCES, FloatingEstimatorConfig
from .estimate import STATUSES, FloatingEstimate
from .estimator import COUNTERS, FloatingEstimator

__all__ = ['FloatingEstimatorConfig', 'FloatingEstimate', 'FloatingEstimator', 'COUNTERS',
           'CONTACT_SOURCES', 'STATUSES']
