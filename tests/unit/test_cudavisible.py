"""CUDA_VISIBLE_DEVICES as CUDA reads it (``cudavisible``): the rules the launcher, the device choice and the
probe share (CUDA Programming Guide, "CUDA Environment Variables")."""

from nccl_doctor.cudavisible import VisibleDevices, visible_devices


def test_unset_is_every_gpu_and_empty_is_none():
    assert visible_devices(None) is None
    assert visible_devices("") == VisibleDevices(())
    assert visible_devices("").cuda_count == 0


def test_an_invalid_entry_hides_itself_and_the_rest():
    assert visible_devices("0,2,-1,1").entries == ("0", "2")
    assert visible_devices("NoDevFiles").cuda_count == 0
    assert visible_devices(" 3 , 1 ").indices == (3, 1)


def test_uuids_are_not_indices():
    v = visible_devices("GPU-f6500d35-939e-034a-0ef8-b6d248daf52c,GPU-8932f937")
    assert v.cuda_count == 2 and v.indices is None and not v.mig


def test_mig_devices_are_one_device_to_cuda():
    v = visible_devices("MIG-4f2a1c3e-5b6d-5e7f-8a9b-0c1d2e3f4a5b,MIG-7d8e9f0a-1b2c-5d3e-4f5a-6b7c8d9e0f1a")
    assert v.mig and v.cuda_count == 1 and len(v.entries) == 2
