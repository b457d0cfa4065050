import os

os.environ.setdefault("MPLBACKEND", "Agg")

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/frames.py (shared synthetic frames)


@pytest.fixture(scope="module")
def df():
    """The synthetic results frame of tests/frames.py (CUTLASS tactics + reference, EP1/EP2, 4 token counts)."""
    from frames import synthetic_frame

    return synthetic_frame()


def pytest_collection_modifyitems(config, items):
    """``gpu``-marked tests skip cleanly on machines without CUDA (CI, laptops)."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
