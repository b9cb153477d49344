"""Matching eigenvalues computed by two algorithms, whose order PyTorch leaves unspecified
(torch.linalg.eig's documentation): used by tests/test_linalg_eig.py and tools/conformance.py."""

from __future__ import annotations

import torch


def matched_order(actual: torch.Tensor, expected: torch.Tensor) -> torch.Tensor:
    """For each matrix of (*, n) eigenvalues (CPU tensors), the index into `actual` matched to each
    entry of `expected`: nearest pairs first, each eigenvalue taken once (NaN is never near)."""
    n = expected.shape[-1]
    got, want = actual.reshape(-1, n), expected.reshape(-1, n)
    order = torch.empty(got.shape, dtype=torch.long)
    for b in range(got.shape[0]):
        distances = (want[b].unsqueeze(1) - got[b].unsqueeze(0)).abs().nan_to_num(float("inf"))
        rows, columns = set(), set()
        for flat in distances.flatten().argsort(stable=True).tolist():
            i, j = divmod(flat, n)
            if i not in rows and j not in columns:
                order[b, i] = j
                rows.add(i)
                columns.add(j)
    return order.reshape(expected.shape)
