# gpuenv's Python probe: one JSON object on stdout, nothing else. Every step is guarded:
# a broken torch install is itself a finding, not a crash of the probe.
import json, sys, platform
out = {"python": platform.python_version(), "executable": sys.executable,
       "free_threaded": bool(getattr(sys, "_is_gil_enabled", lambda: True)() is False)}
try:
    from importlib import metadata as md
    pkgs = {}
    for d in md.distributions():
        name = (d.metadata.get("Name") or "").lower()
        if name.startswith("nvidia-") or name in ("torch", "torchvision", "torchaudio", "triton", "cuda-toolkit"):
            pkgs[name] = d.version
    out["packages"] = pkgs
except Exception as e:
    out["packages_error"] = repr(e)
try:
    import torch
    t = {"version": torch.__version__, "cuda": torch.version.cuda,
         "file": getattr(torch, "__file__", None)}
    try:
        t["cudnn"] = torch.backends.cudnn.version()
    except Exception as e:
        t["cudnn_error"] = repr(e)
    try:
        v = torch.cuda.nccl.version()
        t["nccl"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
    except Exception as e:
        t["nccl_error"] = repr(e)
    import warnings
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            t["cuda_available"] = bool(torch.cuda.is_available())
        except Exception as e:
            t["cuda_available"] = False
            t["cuda_error"] = repr(e)
        msgs = [str(x.message) for x in w]
    if msgs:
        t["cuda_warnings"] = msgs
    try:
        t["arch_list"] = torch.cuda.get_arch_list()
    except Exception as e:
        t["arch_list_error"] = repr(e)
    if t.get("cuda_available"):
        try:
            t["devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        except Exception as e:
            t["devices_error"] = repr(e)
    out["torch"] = t
except ImportError as e:
    out["torch_import_error"] = repr(e) if "torch" not in str(e) or "No module named 'torch'" not in str(e) else None
except Exception as e:
    out["torch_import_error"] = repr(e)
print(json.dumps(out))
