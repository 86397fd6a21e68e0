"""Test-wide settings.

One intra-op thread: the models under test are small, and on a 2-core machine (CI) two threads
cost more in synchronisation than they win, and make timings of neighbouring processes erratic.
"""

import torch

torch.set_num_threads(1)
