"""Kernel backends: reference (torch), cutlass (FlashInfer SM90/SM100), trtllm (FlashInfer trtllm-gen, SM100/103), triton."""

from .base import Backend, Support, Tactic, available_backends, get_backend

__all__ = ["Backend", "Support", "Tactic", "available_backends", "get_backend"]
