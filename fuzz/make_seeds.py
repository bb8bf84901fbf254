#!/usr/bin/env python3
"""Writes the hand-made seed inputs of each fuzz target into corpus/<target>/.

Run from fuzz/: python3 make_seeds.py. The seeds are small, realistic inputs (layers,
archives, METADATA, version.py, requirement strings) that give libFuzzer structure to
mutate; the hex-named files beside them are what libFuzzer found and `cargo fuzz cmin`
kept.
"""
import gzip, hashlib, io, json, os, tarfile

C = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    os.makedirs(os.path.join(C, target), exist_ok=True)
    with open(os.path.join(C, target, name), "wb") as f:
        f.write(data)


def tar(entries, fmt=tarfile.GNU_FORMAT):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=fmt) as t:
        for e in entries:
            kind, name = e[0], e[1]
            ti = tarfile.TarInfo(name)
            ti.mtime = 1700000000
            if kind == "f":
                ti.size = len(e[2])
                t.addfile(ti, io.BytesIO(e[2]))
            elif kind == "d":
                ti.type = tarfile.DIRTYPE
                t.addfile(ti)
            elif kind == "l":
                ti.type = tarfile.SYMTYPE
                ti.linkname = e[2]
                t.addfile(ti)
            elif kind == "h":
                ti.type = tarfile.LNKTYPE
                ti.linkname = e[2]
                t.addfile(ti)
    # Drop the padding to tarfile's 10 KiB record: two zero blocks end the archive.
    data = b.getvalue().rstrip(b"\0")
    data += b"\0" * (-len(data) % 512) + b"\0" * 1024
    return data


def h(b):
    return hashlib.sha256(b).hexdigest()


vp = b"__version__ = '2.4.0+cu121'\ncuda: Optional[str] = '12.1'\ngit_version = 'e4ee3be'\nhip: Optional[str] = None\n"
sp = "opt/conda/lib/python3.11/site-packages"
l1 = tar([("d", "etc"), ("f", "etc/os-release", b'ID=ubuntu\nVERSION_ID="22.04"\n'),
          ("f", sp + "/torch/version.py", vp), ("l", "usr/local/cuda", "cuda-12.4"),
          ("h", "etc/os2", "etc/os-release")])
l2 = tar([("f", sp + "/.wh.torch", b""), ("f", "opt/.wh..wh..opq", b""),
          ("f", sp + "/torch-2.5.1.dist-info/METADATA",
           b"Name: torch\nVersion: 2.5.1\nRequires-Dist: nvidia-cudnn-cu12==9.1.0.70\n")])
l3 = tar([("f", "usr/local/lib/python3.12/dist-packages/" + "x" * 120 + "/torch/version.py", vp)],
         fmt=tarfile.PAX_FORMAT)
put("layer_tar", "plain", l1)
put("layer_tar", "whiteouts", l2)
put("layer_tar", "pax-long-name", l3)
put("layer_tar", "gzip", gzip.compress(l1, mtime=0))

cfg = json.dumps({"architecture": "amd64", "os": "linux",
                  "config": {"Env": ["CUDA_VERSION=12.4.1",
                                     "NVIDIA_REQUIRE_CUDA=cuda>=12.4 brand=tesla,driver>=535,driver<536"],
                             "Labels": {"com.nvidia.cudnn.version": "9.1.0.70-1"}},
                  "rootfs": {"type": "layers", "diff_ids": ["sha256:" + h(l1)]}}).encode()
man = json.dumps([{"Config": h(cfg) + ".json", "RepoTags": ["x:1"], "Layers": ["a/layer.tar"]}]).encode()
put("archive", "docker-save", tar([("f", "manifest.json", man), ("f", h(cfg) + ".json", cfg),
                                   ("f", "a/layer.tar", l1)]))
gl = gzip.compress(l1, mtime=0)
cfg2 = json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                   "rootfs": {"type": "layers", "diff_ids": ["sha256:" + h(l1)]}}).encode()
mf = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                 "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                            "digest": "sha256:" + h(cfg2), "size": len(cfg2)},
                 "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                             "digest": "sha256:" + h(gl), "size": len(gl)}]}).encode()
idx = json.dumps({"schemaVersion": 2, "manifests": [
    {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + h(mf),
     "size": len(mf), "platform": {"os": "linux", "architecture": "amd64"}}]}).encode()
put("archive", "oci", tar([("f", "oci-layout", b'{"imageLayoutVersion":"1.0.0"}'),
                           ("f", "blobs/sha256/" + h(cfg2), cfg2), ("f", "blobs/sha256/" + h(gl), gl),
                           ("f", "blobs/sha256/" + h(mf), mf), ("f", "index.json", idx)]))

put("metadata", "torch-2.4.1",
    b"Metadata-Version: 2.1\nName: torch\nVersion: 2.4.1\nRequires-Python: >=3.8.0\nRequires-Dist: filelock\n"
    b"Requires-Dist: nvidia-cudnn-cu12 ==9.1.0.70 ; platform_system == \"Linux\" and platform_machine == \"x86_64\"\n"
    b"Requires-Dist: nvidia-nccl-cu12 ==2.20.5 ; platform_system == \"Linux\" and platform_machine == \"x86_64\"\n"
    b"Requires-Dist: opt-einsum >=3.3 ; extra == 'opt-einsum'\n\nDescription\n")
put("metadata", "torch-2.11-cu13",
    b"Name: torch\nVersion: 2.11.0\nRequires-Dist: cuda-toolkit[cublas,cudart,cufft]==13.0.2; platform_system == \"Linux\"\n"
    b"Requires-Dist: cuda-bindings<14,>=13.0.3\nRequires-Dist: nvidia-cudnn-cu13==9.19.0.56; platform_system == \"Linux\"\n")
put("metadata", "egg-pkg-info",
    b"Metadata-Version: 1.2\nName: torch\nVersion: 2.6.0a0+ecf3bae40a.nv25.1\nSummary: Tensors\n  continued\n")
# Inputs that crashed pep508_rs 0.9.2 (see README.md), kept as regressions.
put("metadata", "regression-pep508-name-panic",
    b"Name: torch\nRequires-Dist: nvidia-cudnn-)cu13==9.19.0.56; platform_system == \"Linux\"\n")
put("metadata", "regression-pep508-char-boundary",
    "Name: torch\nRequires-Dist: nvidia-nccl-cu12 ==2.20.5 ; platform_system == \"Linux\"\u00e9 and platform_machine == \"x86_64\"\n".encode())

put("version_py", "cu121",
    b"from typing import Optional\n__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip']\n" + vp)
put("version_py", "cpu",
    b"__version__ = '2.5.1+cpu'\ndebug = False\ncuda: Optional[str] = None\nhip: Optional[str] = None\nxpu: Optional[str] = None\n")
put("version_py", "ngc",
    b"__version__ = '2.6.0a0+ecf3bae40a.nv25.1'\ncuda = \"12.8\"\ngit_version = 'ecf3bae40a6f2f0f3b237bbc9d6ed9c1fab0a2f4'\n")

R = ("cuda>=12.4 brand=tesla,driver>=470,driver<471 brand=unknown,driver>=470,driver<471 "
     "brand=tesla,driver>=535,driver<536 brand=geforce,driver>=535,driver<536")
put("require", "cuda-12.4.1", ("12.2|535.104.05|9.0|tesla|" + R).encode())
put("require", "no-gpu", b"12.3|545.29.06|||cuda>=12.4")
put("require", "quirks", b"12.2|535.104.05|8.6|geforce|cuda==12.2 cuda!12 arch>=8.0,,brand=GeForce ,")
