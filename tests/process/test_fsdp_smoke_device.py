"""The smoke test's tensors meet the logits on the logits' device (issue 15, point 1), proved on CPU.

On a GPU cluster FSDP2's root pre-forward moves the forward's *inputs* to CUDA
(``torch/distributed/fsdp/_fully_shard/_fsdp_state.py`` ``FSDPState._root_pre_forward``, ``_to_kwargs``), but
the loss target ``tokens[:, 1:]`` never passes through it: a batch made on the CPU meets CUDA logits in
``cross_entropy`` and step 1 raises. Here the ``meta`` device stands in for CUDA: the model lives there, a
forward pre-hook moves the inputs as FSDP2 does, and every torch call of the step must see one device.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.torch

VOCAB = 32


def _one_device_mode():
    """A TorchFunctionMode that records every call whose tensor arguments sit on more than one device
    (a CPU scalar, which torch lets mix with any device, excepted)."""
    import torch
    from torch.overrides import TorchFunctionMode

    class OneDevice(TorchFunctionMode):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.mixed: list[str] = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            flat = list(args) + list(kwargs.values())
            tensors = [a for a in flat if isinstance(a, torch.Tensor) and not (a.dim() == 0 and a.device.type == "cpu")]
            devices = {t.device for t in tensors}
            if len(devices) > 1:
                self.mixed.append(f"{getattr(func, '__name__', func)}: {sorted(map(str, devices))}")
            return func(*args, **kwargs)

    return OneDevice()


def _model_on(device: str):
    from nccl_doctor.preflight.fsdp_smoke import _model

    model = _model(16, 1, VOCAB).to(device)
    model.register_forward_pre_hook(lambda _mod, args: tuple(a.to(device) for a in args))  # as FSDP2's root does
    return model


def test_the_batch_and_the_loss_target_live_on_the_ranks_device():
    import torch

    from nccl_doctor.preflight.fsdp_smoke import smoke_batch, train

    model = _model_on("meta")
    optim = torch.optim.AdamW(model.parameters(), lr=1e-2)
    tokens = smoke_batch(VOCAB, dp_index=0, device=torch.device("meta"))
    mode = _one_device_mode()
    with mode:
        losses = train(model, optim, tokens, steps=2, vocab=VOCAB)
    assert mode.mixed == []
    assert tokens.device.type == "meta" and [x.device.type for x in losses] == ["meta", "meta"]


def test_a_batch_left_on_the_cpu_is_what_this_catches():
    """The defect itself, kept as a check of the check: today's CPU batch meets meta (CUDA) logits."""
    import torch

    from nccl_doctor.preflight.fsdp_smoke import smoke_batch, train

    model = _model_on("meta")
    optim = torch.optim.AdamW(model.parameters(), lr=1e-2)
    tokens = smoke_batch(VOCAB, dp_index=0, device=torch.device("cpu"))
    with pytest.raises(RuntimeError, match="device"):
        train(model, optim, tokens, steps=1, vocab=VOCAB)


def test_the_batch_is_fixed_and_the_same_on_every_device():
    import torch

    from nccl_doctor.preflight.fsdp_smoke import smoke_batch

    a = smoke_batch(VOCAB, dp_index=0, device=torch.device("cpu"))
    assert torch.equal(a, smoke_batch(VOCAB, dp_index=0, device=torch.device("cpu")))
    assert not torch.equal(a, smoke_batch(VOCAB, dp_index=1, device=torch.device("cpu")))  # each replica its own


def test_mesh_device_is_the_current_accelerator_or_the_cpu(monkeypatch):
    import torch

    from nccl_doctor.preflight.fsdp_smoke import mesh_device

    class Mesh:
        def __init__(self, kind: str):
            self.device_type = kind

    assert mesh_device(Mesh("cpu")) == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    assert mesh_device(Mesh("cuda")) == torch.device("cuda", 3)
