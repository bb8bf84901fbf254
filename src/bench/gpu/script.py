# gpuenv's GPU bench script
# It only MEASURES: one JSON object per line on stdout, raw quantities only (sizes,
# iteration counts, seconds). Every rate (TFLOPS, GB/s, bus bandwidth, images/s) is
# computed by gpuenv in Rust, where it is tested without a GPU.
#
#   python3 script.py [--quick|--full|--check] [--gpus 0,1,..] [--burn SECONDS]
#
# --check prints the header (what torch sees) and ends: a look before a long burn-in.
#
# Lines (every one has "kind"):
#   header     python, torch, CUDA, cuDNN, NCCL versions, the mode, every GPU measured
#   matmul     gpu, dtype, m, n, k, iters, seconds          (one C = A @ B per iteration)
#   copy       direction (d2d|h2d|d2h|p2p), gpu, [peer], bytes, iters, seconds
#   all_reduce ranks, gpus, bytes, dtype, iters, seconds    (slowest rank's time)
#   resnet50   gpu, batch, precision, channels_last, steps, seconds
#   heartbeat  gpu, elapsed, iters                           (burn mode, every ~5 s)
#   burn       gpu, dtype, m, n, k, iters, seconds          (burn mode, at the end)
#   skipped    what, [gpu], reason                           (not measurable, and why)
#   done       seconds                                       (the script finished)
# A missing torch or CUDA is a "skipped" line and exit 0: not an error of the script.
#
# Why it is built this way:
# - CUDA_DEVICE_ORDER=PCI_BUS_ID before torch loads, so torch's index is nvidia-smi's.
# - Multi-process parts (NCCL all_reduce, the burn) start workers as `python -c WORKER`
#   with their own source, so the script works whether it runs from a file, `-c` or
#   stdin; a worker exits when its parent goes away (PR_SET_PDEATHSIG, and a check of
#   its parent's pid), so killing this script never leaves a GPU under load.
# - Timing uses CUDA events on the stream that does the work, after warm-ups; the
#   iteration count is chosen so each timed run lasts a stated target time.
# - No managed (unified) memory is ever allocated: device tensors, and pinned host
#   tensors for host<->device copies.
import json
import os
import sys
import time

SCRIPT_VERSION = 1

if "CUDA_DEVICE_ORDER" not in os.environ:
    os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"

MIB = 1 << 20
GIB = 1 << 30

# Per mode: sizes (bounded so --quick fits a 16 GB GPU) and how long each timed run lasts.
MODES = {
    "quick": {
        "matmul_n": 8192, "matmul_s": 0.25,
        "copy_bytes": 1 * GIB, "copy_s": 0.25,
        "host_bytes": 256 * MIB, "host_s": 0.25,
        "p2p_bytes": 256 * MIB, "p2p_s": 0.1,
        "allreduce_bytes": [32 * MIB, 256 * MIB], "allreduce_iters": 20,
        "resnet_batch": 128, "resnet_warmup": 5, "resnet_steps": 15,
    },
    "full": {
        "matmul_n": 16384, "matmul_s": 2.0,
        "copy_bytes": 4 * GIB, "copy_s": 1.0,
        "host_bytes": 1 * GIB, "host_s": 1.0,
        "p2p_bytes": 1 * GIB, "p2p_s": 0.5,
        "allreduce_bytes": [32 * MIB, 256 * MIB, 1 * GIB], "allreduce_iters": 50,
        "resnet_batch": 256, "resnet_warmup": 10, "resnet_steps": 50,
    },
}


def emit(obj):
    try:
        line = json.dumps(obj, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as e:
        line = json.dumps({"kind": "skipped", "what": str(obj.get("kind")),
                           "reason": "unprintable result: " + repr(e)[:300]})
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def reason_of(e):
    text = (type(e).__name__ + ": " + str(e)).strip()
    # The first lines say what went wrong; torch's long hints follow.
    return " ".join(text.splitlines()[:3])[:500]


def skipped(what, reason, gpu=None):
    obj = {"kind": "skipped", "what": what, "reason": reason}
    if gpu is not None:
        obj["gpu"] = gpu
    emit(obj)


def parse_args(argv):
    mode = "quick"
    gpus = None
    burn = None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--quick":
            mode = "quick"
        elif a == "--full":
            mode = "full"
        elif a == "--check":
            mode = "check"
        elif a in ("--gpus", "--burn"):
            if i + 1 >= len(argv):
                usage("%s needs a value" % a)
            v = argv[i + 1]
            i += 1
            if a == "--gpus":
                try:
                    gpus = [int(x) for x in v.split(",") if x.strip() != ""]
                except ValueError:
                    usage("--gpus expects indices like 0,1,2; got %r" % v[:50])
                if not gpus or any(g < 0 for g in gpus) or len(set(gpus)) != len(gpus):
                    usage("--gpus expects distinct indices like 0,1,2; got %r" % v[:50])
            else:
                try:
                    burn = float(v)
                except ValueError:
                    usage("--burn expects seconds; got %r" % v[:50])
                if not (burn > 0 and burn <= 7 * 24 * 3600):
                    usage("--burn expects seconds between 0 and a week; got %r" % v[:50])
        else:
            usage("unknown argument %r" % a[:50])
        i += 1
    return mode, gpus, burn


def usage(msg):
    sys.stderr.write("gpuenv bench script: %s\n"
                     "usage: script.py [--quick|--full|--check] [--gpus 0,1,..] [--burn SECONDS]\n" % msg)
    sys.exit(2)


def timed_events(torch, dev, fn, target_s, min_iters=3, max_iters=100000):
    """Times enough calls of fn to last about target_s, after a warm-up of half as long
    (so clocks have ramped up and libraries have chosen their kernels). Returns
    (iters, seconds)."""
    with torch.cuda.device(dev):
        for _ in range(3):
            fn()
        torch.cuda.synchronize(dev)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        probe = 3
        start.record()
        for _ in range(probe):
            fn()
        end.record()
        end.synchronize()
        per = max(start.elapsed_time(end) / 1000.0 / probe, 1e-7)
        iters = int(min(max(target_s / per, min_iters), max_iters))
        for _ in range(iters // 2):
            fn()
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        return iters, start.elapsed_time(end) / 1000.0


def free_bytes(torch, dev):
    try:
        free, _total = torch.cuda.mem_get_info(dev)
        return int(free)
    except Exception:
        return None


def release(torch):
    try:
        torch.cuda.empty_cache()
    except Exception:
        pass


def header(torch, gpus, mode, burn):
    h = {"kind": "header", "script_version": SCRIPT_VERSION, "mode": mode,
         "python": sys.version.split()[0], "torch": torch.__version__,
         "cuda": torch.version.cuda, "burn_seconds": burn,
         "device_order": os.environ.get("CUDA_DEVICE_ORDER"),
         "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    try:
        h["cudnn"] = torch.backends.cudnn.version()
    except Exception:
        h["cudnn"] = None
    try:
        v = torch.cuda.nccl.version()
        h["nccl"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
    except Exception:
        h["nccl"] = None
    try:
        import torchvision
        h["torchvision"] = torchvision.__version__
    except Exception:
        h["torchvision"] = None
    devs = []
    for g in gpus:
        try:
            p = torch.cuda.get_device_properties(g)
        except Exception as e:
            devs.append({"index": g, "error": reason_of(e)})
            continue
        d = {"index": g, "name": p.name, "cc": "%d.%d" % (p.major, p.minor),
             "memory_bytes": int(p.total_memory),
             "sm_count": int(getattr(p, "multi_processor_count", 0))}
        for attr in ("pci_bus_id", "pci_device_id", "pci_domain_id"):
            if hasattr(p, attr):
                d[attr] = int(getattr(p, attr))
        if hasattr(p, "uuid"):
            d["uuid"] = str(p.uuid)
        devs.append(d)
    h["gpus"] = devs
    emit(h)


# ---- matmul ------------------------------------------------------------------------

def matmul(torch, g, dtype_name, n, target_s):
    dev = torch.device("cuda", g)
    if dtype_name == "fp8":
        return matmul_fp8(torch, g, n, target_s)
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}[dtype_name]
    m = torch.backends.cuda.matmul
    # TF32 is FP32 inputs on tensor cores: off by default in torch since 1.12. torch 2.9
    # added fp32_precision and refuses a mix of it and the legacy allow_tf32 flag, so
    # only one of the two is touched: the new one where it exists.
    flag = "fp32_precision" if hasattr(m, "fp32_precision") else "allow_tf32"
    on = {"fp32_precision": "tf32", "allow_tf32": True}[flag]
    off = {"fp32_precision": "ieee", "allow_tf32": False}[flag]
    old = getattr(m, flag)
    try:
        setattr(m, flag, on if dtype_name == "tf32" else off)
        a = torch.randn(n, n, device=dev, dtype=dt)
        b = torch.randn(n, n, device=dev, dtype=dt)
        c = torch.empty(n, n, device=dev, dtype=dt)

        def step():
            torch.mm(a, b, out=c)

        iters, secs = timed_events(torch, g, step, target_s)
        emit({"kind": "matmul", "gpu": g, "dtype": dtype_name, "m": n, "n": n, "k": n,
              "iters": iters, "seconds": secs, "tf32_flag": flag})
    finally:
        setattr(m, flag, old)


def matmul_fp8(torch, g, n, target_s):
    p = torch.cuda.get_device_properties(g)
    if (p.major, p.minor) < (8, 9):
        skipped("matmul fp8", "FP8 tensor cores need compute capability 8.9 or newer; "
                "this GPU is %d.%d" % (p.major, p.minor), g)
        return
    if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
        skipped("matmul fp8", "torch %s has no float8_e4m3fn/_scaled_mm" % torch.__version__, g)
        return
    dev = torch.device("cuda", g)
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16).to(torch.float8_e4m3fn)
    # _scaled_mm wants the second operand column-major: the transpose of a row-major one.
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16).to(torch.float8_e4m3fn).t()
    one = torch.tensor(1.0, device=dev, dtype=torch.float32)
    # Fast accumulation is what FP8 training recipes use for the forward pass; a torch
    # whose _scaled_mm lacks the flag is measured without it, and the line says which.
    kw = {"scale_a": one, "scale_b": one, "out_dtype": torch.bfloat16, "use_fast_accum": True}
    try:
        torch._scaled_mm(a, b, **kw)
    except TypeError:
        del kw["use_fast_accum"]
        torch._scaled_mm(a, b, **kw)

    def step():
        # torch before 2.5 returned (out, amax); the result is not needed either way.
        torch._scaled_mm(a, b, **kw)

    iters, secs = timed_events(torch, g, step, target_s)
    emit({"kind": "matmul", "gpu": g, "dtype": "fp8", "fp8_format": "e4m3fn",
          "fast_accum": "use_fast_accum" in kw, "m": n, "n": n, "k": n, "iters": iters,
          "seconds": secs})


# ---- copies ------------------------------------------------------------------------

def copy_d2d(torch, g, nbytes, target_s):
    dev = torch.device("cuda", g)
    src = torch.empty(nbytes, device=dev, dtype=torch.uint8).fill_(1)
    dst = torch.empty(nbytes, device=dev, dtype=torch.uint8)
    iters, secs = timed_events(torch, g, lambda: dst.copy_(src), target_s)
    # bytes is one copy's size; gpuenv counts a device copy as read plus write.
    emit({"kind": "copy", "direction": "d2d", "gpu": g, "bytes": nbytes, "iters": iters,
          "seconds": secs})


def copy_host(torch, g, nbytes, target_s):
    dev = torch.device("cuda", g)
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True).fill_(1)
    d = torch.empty(nbytes, device=dev, dtype=torch.uint8)
    iters, secs = timed_events(torch, g, lambda: d.copy_(host, non_blocking=True), target_s)
    emit({"kind": "copy", "direction": "h2d", "gpu": g, "bytes": nbytes, "iters": iters,
          "seconds": secs, "pinned": True})
    iters, secs = timed_events(torch, g, lambda: host.copy_(d, non_blocking=True), target_s)
    emit({"kind": "copy", "direction": "d2h", "gpu": g, "bytes": nbytes, "iters": iters,
          "seconds": secs, "pinned": True})


def copy_p2p(torch, src_g, dst_g, nbytes, target_s):
    access = bool(torch.cuda.can_device_access_peer(src_g, dst_g))
    src = torch.empty(nbytes, device=torch.device("cuda", src_g), dtype=torch.uint8).fill_(1)
    dst = torch.empty(nbytes, device=torch.device("cuda", dst_g), dtype=torch.uint8)

    def sync():
        torch.cuda.synchronize(src_g)
        torch.cuda.synchronize(dst_g)

    # Wall time around full synchronizations of both devices: torch orders a cross-device
    # copy against both devices' streams, so no single stream's events bracket it surely.
    for _ in range(3):
        dst.copy_(src)
    sync()
    t0 = time.perf_counter()
    for _ in range(3):
        dst.copy_(src)
    sync()
    per = max((time.perf_counter() - t0) / 3, 1e-7)
    iters = int(min(max(target_s / per, 3), 100000))
    t0 = time.perf_counter()
    for _ in range(iters):
        dst.copy_(src)
    sync()
    secs = time.perf_counter() - t0
    emit({"kind": "copy", "direction": "p2p", "gpu": src_g, "peer": dst_g, "bytes": nbytes,
          "iters": iters, "seconds": secs, "peer_access": access, "timer": "wall"})


# ---- ResNet-50 ---------------------------------------------------------------------

def resnet50(torch, g, cfg):
    try:
        import torchvision
    except Exception as e:
        skipped("resnet50", "torchvision is not importable: " + reason_of(e), g)
        return
    dev = torch.device("cuda", g)
    torch.backends.cudnn.benchmark = True
    batch = cfg["resnet_batch"]
    oom = getattr(torch.cuda, "OutOfMemoryError", MemoryError)
    while True:
        try:
            return resnet50_at(torch, torchvision, g, dev, batch, cfg)
        except oom:
            pass
        # Outside the except block: its traceback no longer holds the model's tensors.
        release(torch)
        if batch <= 32:
            skipped("resnet50", "out of memory even at batch 32", g)
            return
        batch //= 2


def resnet50_at(torch, torchvision, g, dev, batch, cfg):
    with torch.cuda.device(g):
        model = torchvision.models.resnet50(weights=None).to(dev)
        model = model.to(memory_format=torch.channels_last)
        model.train()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        loss_fn = torch.nn.CrossEntropyLoss()
        x = torch.randn(batch, 3, 224, 224, device=dev).to(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (batch,), device=dev)

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()

        for _ in range(cfg["resnet_warmup"]):
            step()
        torch.cuda.synchronize(g)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        steps = cfg["resnet_steps"]
        start.record()
        for _ in range(steps):
            step()
        end.record()
        end.synchronize()
        emit({"kind": "resnet50", "gpu": g, "batch": batch, "precision": "amp-bf16",
              "channels_last": True, "steps": steps,
              "seconds": start.elapsed_time(end) / 1000.0,
              "image_size": 224, "optimizer": "sgd-momentum"})


# ---- workers (all_reduce, burn) ----------------------------------------------------

WORKER = r'''
import json, os, sys, time, threading
def _die_with_parent(ppid):
    try:
        import ctypes, signal
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_DEATHSIG
    except Exception:
        pass
    def watch():
        while True:
            if os.getppid() != ppid:
                os._exit(3)
            time.sleep(1.0)
    threading.Thread(target=watch, daemon=True).start()
def emit(obj):
    sys.stdout.write(json.dumps(obj, sort_keys=True, allow_nan=False) + "\n")
    sys.stdout.flush()
job = json.loads(sys.argv[1])
_die_with_parent(job["ppid"])
import torch
if job["task"] == "all_reduce":
    import datetime
    import torch.distributed as dist
    rank, world, g = job["rank"], job["world"], job["gpus"][job["rank"]]
    torch.cuda.set_device(g)
    dev = torch.device("cuda", g)
    kw = dict(backend="nccl", init_method="tcp://127.0.0.1:%d" % job["port"], rank=rank,
              world_size=world, timeout=datetime.timedelta(seconds=job["timeout"]))
    try:
        dist.init_process_group(device_id=dev, **kw)
    except TypeError:
        dist.init_process_group(**kw)
    for nbytes in job["sizes"]:
        t = torch.ones(nbytes // 4, device=dev, dtype=torch.float32)
        for _ in range(5):
            dist.all_reduce(t)
        torch.cuda.synchronize(g)
        dist.barrier()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(job["iters"]):
            dist.all_reduce(t)
        end.record()
        end.synchronize()
        secs = torch.tensor([start.elapsed_time(end) / 1000.0], device=dev, dtype=torch.float64)
        # The slowest rank's time: the collective is done when every rank is done.
        dist.all_reduce(secs, op=dist.ReduceOp.MAX)
        if rank == 0:
            emit({"kind": "all_reduce", "ranks": world, "gpus": job["gpus"], "bytes": (nbytes // 4) * 4,
                  "dtype": "float32", "op": "sum", "iters": job["iters"],
                  "seconds": float(secs.item())})
        del t
        torch.cuda.empty_cache()
    dist.destroy_process_group()
elif job["task"] == "burn":
    g, n, total = job["gpu"], job["n"], float(job["seconds"])
    torch.cuda.set_device(g)
    dev = torch.device("cuda", g)
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    c = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
    torch.mm(a, b, out=c)
    torch.cuda.synchronize(g)
    t0 = time.perf_counter()
    beat = t0
    iters = 0
    chunk = 20
    while True:
        for _ in range(chunk):
            torch.mm(a, b, out=c)
        torch.cuda.synchronize(g)
        iters += chunk
        now = time.perf_counter()
        if now - beat >= 5.0:
            beat = now
            emit({"kind": "heartbeat", "gpu": g, "elapsed": now - t0, "iters": iters})
        if now - t0 >= total:
            break
    emit({"kind": "burn", "gpu": g, "dtype": "bf16", "m": n, "n": n, "k": n, "iters": iters,
          "seconds": time.perf_counter() - t0})
'''


def free_port():
    import socket
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


def start_worker(job):
    import subprocess
    job = dict(job, ppid=os.getpid())
    return subprocess.Popen([sys.executable, "-c", WORKER, json.dumps(job)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            universal_newlines=True, errors="replace")


def stop(procs):
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        try:
            p.wait(timeout=10)
        except Exception:
            pass


def relay(procs, deadline):
    """Copies every worker's JSON lines to stdout as they come; returns each worker's
    stderr tail and whether the deadline passed."""
    import threading
    lock = threading.Lock()
    tails = [[] for _ in procs]

    def out(p):
        for line in p.stdout:
            line = line.strip()
            if line.startswith("{"):
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                with lock:
                    emit(obj)

    def err(i, p):
        for line in p.stderr:
            tails[i].append(line.rstrip())
            del tails[i][:-20]

    threads = []
    for i, p in enumerate(procs):
        for t in (threading.Thread(target=out, args=(p,)), threading.Thread(target=err, args=(i, p))):
            t.daemon = True
            t.start()
            threads.append(t)
    # One worker failing stops the others: NCCL peers of a dead rank would otherwise wait
    # for it until their own timeout.
    late = False
    while True:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            break
        if any(c not in (None, 0) for c in codes):
            stop(procs)
            break
        if time.monotonic() > deadline:
            late = True
            stop(procs)
            break
        time.sleep(0.2)
    for t in threads:
        t.join(timeout=5)
    return tails, late


def failure(procs, tails, late, what_s):
    if late:
        return "timed out after %s" % what_s
    # The first worker that failed by itself, not one stopped because of it.
    failed = [(p, t) for p, t in zip(procs, tails) if p.returncode not in (0, -9)]
    failed += [(p, t) for p, t in zip(procs, tails) if p.returncode == -9]
    for p, tail in failed:
        if p.returncode != 0:
            # The error itself is a traceback's last line: it goes first, so that a cut
            # (here, or gpuenv's excerpt) drops the frames with their long paths, not it.
            last = [l.strip() for l in tail if l.strip()][-3:]
            return "a worker exited with %s: %s" % (p.returncode, " | ".join(reversed(last))[:500])
    return None


def all_reduce(torch, gpus, cfg):
    if len(gpus) < 2:
        skipped("all_reduce", "one GPU: an all_reduce over 1 rank moves no data "
                "(nccl-tests' bus bandwidth factor 2(n-1)/n is 0)")
        return
    try:
        import torch.distributed as dist
        if not dist.is_available() or not dist.is_nccl_available():
            skipped("all_reduce", "torch %s was built without NCCL" % torch.__version__)
            return
    except Exception as e:
        skipped("all_reduce", "torch.distributed is not importable: " + reason_of(e))
        return
    timeout = 300 if cfg is MODES["full"] else 150
    port = free_port()
    procs = []
    try:
        for r in range(len(gpus)):
            procs.append(start_worker({"task": "all_reduce", "rank": r, "world": len(gpus),
                                       "gpus": gpus, "port": port, "timeout": timeout,
                                       "sizes": cfg["allreduce_bytes"],
                                       "iters": cfg["allreduce_iters"]}))
        tails, late = relay(procs, time.monotonic() + timeout)
    finally:
        stop(procs)
    why = failure(procs, tails, late, "%d s" % timeout)
    if why:
        skipped("all_reduce", why)


def burn(torch, gpus, seconds):
    procs = []
    deadline = time.monotonic() + seconds + 180
    try:
        for g in gpus:
            # 8192 cubed in BF16 keeps every tensor core busy on any GPU of the last
            # generations, in 384 MiB.
            procs.append(start_worker({"task": "burn", "gpu": g, "n": 8192, "seconds": seconds}))
        tails, late = relay(procs, deadline)
    finally:
        stop(procs)
    why = failure(procs, tails, late, "%d s" % (seconds + 180))
    if why:
        skipped("burn", why)


# ---- main --------------------------------------------------------------------------

def guarded(torch, what, gpu, fn, *args):
    """Runs one measurement; its failure is a "skipped" line, and its memory is given back
    (after its frames, and an exception's traceback, are gone)."""
    try:
        fn(*args)
    except Exception as e:
        skipped(what, reason_of(e), gpu)
    release(torch)


def die_with_parent():
    """Ends the script when the program that started it (gpuenv) goes away: a killed
    gpuenv must not leave the GPUs under load. Its workers follow it (see WORKER)."""
    import threading
    ppid = os.getppid()
    if ppid <= 1:
        # Started by init (PID 1 of a container, or reparented already): nothing to watch.
        return

    def watch():
        while True:
            if os.getppid() != ppid:
                os._exit(3)
            time.sleep(1.0)

    threading.Thread(target=watch, daemon=True).start()


def main(argv):
    t0 = time.monotonic()
    mode, chosen, burn_s = parse_args(argv)
    die_with_parent()
    cfg = MODES.get(mode, MODES["quick"])
    try:
        import torch
    except Exception as e:
        emit({"kind": "header", "script_version": SCRIPT_VERSION, "mode": mode,
              "python": sys.version.split()[0], "torch": None, "gpus": []})
        skipped("all", "torch is not importable: " + reason_of(e))
        emit({"kind": "done", "seconds": time.monotonic() - t0})
        return 0
    try:
        ok = torch.cuda.is_available()
        count = torch.cuda.device_count() if ok else 0
    except Exception as e:
        ok, count = False, 0
        why = reason_of(e)
    else:
        why = "torch %s sees no CUDA device (torch.version.cuda = %s)" % (
            torch.__version__, torch.version.cuda)
    if not ok or count == 0:
        emit({"kind": "header", "script_version": SCRIPT_VERSION, "mode": mode,
              "python": sys.version.split()[0], "torch": torch.__version__,
              "cuda": torch.version.cuda, "gpus": []})
        skipped("all", why)
        emit({"kind": "done", "seconds": time.monotonic() - t0})
        return 0
    gpus = list(range(count)) if chosen is None else chosen
    bad = [g for g in gpus if g >= count]
    if bad:
        usage("--gpus names %s but torch sees %d GPU(s)" % (bad, count))
    header(torch, gpus, mode, burn_s)
    if mode == "check":
        emit({"kind": "done", "seconds": time.monotonic() - t0})
        return 0

    if burn_s is not None:
        guarded(torch, "burn", None, burn, torch, gpus, burn_s)
        emit({"kind": "done", "seconds": time.monotonic() - t0})
        return 0

    for g in gpus:
        # Sizes shrink on a small or busy GPU rather than failing: the line states them.
        free = free_bytes(torch, g) or 0
        n = cfg["matmul_n"]
        while n > 2048 and 3 * n * n * 4 > free // 2:
            n //= 2
        for dt in ("bf16", "fp16", "tf32", "fp8"):
            guarded(torch, "matmul " + dt, g, matmul, torch, g, dt, n, cfg["matmul_s"])
        nbytes = cfg["copy_bytes"]
        while nbytes > 64 * MIB and 2 * nbytes > free // 2:
            nbytes //= 2
        guarded(torch, "copy d2d", g, copy_d2d, torch, g, nbytes, cfg["copy_s"])
        guarded(torch, "copy host", g, copy_host, torch, g, cfg["host_bytes"], cfg["host_s"])
    if len(gpus) > 1:
        for s in gpus:
            for d in gpus:
                if s != d:
                    guarded(torch, "copy p2p %d->%d" % (s, d), s, copy_p2p, torch, s, d,
                            cfg["p2p_bytes"], cfg["p2p_s"])
    else:
        skipped("copy p2p", "one GPU: no pair to measure")
    guarded(torch, "all_reduce", None, all_reduce, torch, gpus, cfg)
    for g in gpus:
        guarded(torch, "resnet50", g, resnet50, torch, g, cfg)
    emit({"kind": "done", "seconds": time.monotonic() - t0})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
