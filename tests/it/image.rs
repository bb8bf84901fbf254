//! The image readers over images built in the tests (see `image_build`): what detection
//! finds in realistic layouts, and the errors hostile archives get.

use gpuenv::image::archive::{Platform, ReadOptions, read_archive, read_archive_file, read_oci_dir};
use gpuenv::image::detect::LibOrigin;
use gpuenv::image::layer::Limits;
use gpuenv::image::require::{GpuTarget, HostTarget, evaluate};
use gpuenv::image::{ImageError, claims};
use serde_json::json;

use super::image_build::*;

pub const UBUNTU_2204: &[u8] =
    b"PRETTY_NAME=\"Ubuntu 22.04.4 LTS\"\nNAME=\"Ubuntu\"\nVERSION_ID=\"22.04\"\nVERSION=\"22.04.4 LTS (Jammy Jellyfish)\"\nID=ubuntu\n";
const UBUNTU_2404: &[u8] = b"PRETTY_NAME=\"Ubuntu 24.04.1 LTS\"\nVERSION_ID=\"24.04\"\nID=ubuntu\n";

/// The real `NVIDIA_REQUIRE_CUDA` of nvidia/cuda:12.4.1-*-ubuntu22.04 (amd64).
const REQUIRE_12_4_1: &str = "NVIDIA_REQUIRE_CUDA=cuda>=12.4 brand=tesla,driver>=470,driver<471 brand=unknown,driver>=470,driver<471 brand=nvidia,driver>=470,driver<471 brand=nvidiartx,driver>=470,driver<471 brand=geforce,driver>=470,driver<471 brand=geforcertx,driver>=470,driver<471 brand=quadro,driver>=470,driver<471 brand=quadrortx,driver>=470,driver<471 brand=titan,driver>=470,driver<471 brand=titanrtx,driver>=470,driver<471 brand=tesla,driver>=525,driver<526 brand=unknown,driver>=525,driver<526 brand=nvidia,driver>=525,driver<526 brand=nvidiartx,driver>=525,driver<526 brand=geforce,driver>=525,driver<526 brand=geforcertx,driver>=525,driver<526 brand=quadro,driver>=525,driver<526 brand=quadrortx,driver>=525,driver<526 brand=titan,driver>=525,driver<526 brand=titanrtx,driver>=525,driver<526 brand=tesla,driver>=535,driver<536 brand=unknown,driver>=535,driver<536 brand=nvidia,driver>=535,driver<536 brand=nvidiartx,driver>=535,driver<536 brand=geforce,driver>=535,driver<536 brand=geforcertx,driver>=535,driver<536 brand=quadro,driver>=535,driver<536 brand=quadrortx,driver>=535,driver<536 brand=titan,driver>=535,driver<536 brand=titanrtx,driver>=535,driver<536";

pub fn version_py(version: &str, cuda: Option<&str>) -> Vec<u8> {
    let cuda = cuda.map_or("None".to_string(), |c| format!("'{c}'"));
    format!(
        "from typing import Optional\n__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip']\n__version__ = '{version}'\ndebug = False\ncuda: Optional[str] = {cuda}\ngit_version = 'e4ee3be4063b7c430974252fdf7db42273388d86'\nhip: Optional[str] = None\n"
    )
    .into_bytes()
}

pub fn torch_metadata(version: &str, pins: &[&str]) -> Vec<u8> {
    let mut s = format!(
        "Metadata-Version: 2.1\nName: torch\nVersion: {version}\nRequires-Python: >=3.8.0\nRequires-Dist: filelock\n"
    );
    for p in pins {
        s.push_str(&format!(
            "Requires-Dist: {p} ; platform_system == \"Linux\" and platform_machine == \"x86_64\"\n"
        ));
    }
    s.push_str("\nTensors and Dynamic neural networks in Python\n");
    s.into_bytes()
}

/// Reads `bytes` both ways an archive is read: streamed in one pass, and as a file whose
/// layers are read where they lie, several at once. Both must give the same image, or fail
/// for the same reason; the streamed result is returned.
fn both(bytes: &[u8], opts: &ReadOptions) -> Result<gpuenv::image::Image, ImageError> {
    let streamed = read_archive(bytes, opts);
    let mut file = tempfile::tempfile().unwrap();
    std::io::Write::write_all(&mut file, bytes).unwrap();
    let filed = read_archive_file(&file, opts);
    match (&streamed, &filed) {
        (Ok(a), Ok(b)) => {
            let json =
                |i: &gpuenv::image::Image| serde_json::to_string(&(i.facts(), &i.layers, &i.names)).unwrap();
            assert_eq!(json(a), json(b));
            assert_eq!(a.layout, b.layout);
        }
        (Err(a), Err(b)) => assert_eq!(
            std::mem::discriminant(a.root()),
            std::mem::discriminant(b.root()),
            "streamed: {a}\nas a file: {b}"
        ),
        _ => panic!(
            "streamed: {:?}\nas a file: {:?}",
            streamed.as_ref().map(|_| ()),
            filed.as_ref().map(|_| ())
        ),
    }
    streamed
}

/// Options that pick a Linux platform from an index.
fn for_platform(architecture: &str, variant: Option<&str>) -> ReadOptions {
    ReadOptions {
        platform: Platform {
            os: "linux".into(),
            architecture: architecture.into(),
            variant: variant.map(str::to_string),
        },
        ..Default::default()
    }
}

fn read(bytes: &[u8]) -> gpuenv::image::Image {
    both(bytes, &ReadOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn read_err(bytes: &[u8]) -> ImageError {
    match both(bytes, &ReadOptions::default()) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e,
    }
}

pub fn base_layer() -> Vec<u8> {
    layer(&[
        E::Dir("etc"),
        E::File("usr/lib/os-release", UBUNTU_2204),
        E::Symlink("etc/os-release", "../usr/lib/os-release"),
        E::File("usr/bin/python3.10", b"\x7fELF"),
        E::Symlink("usr/bin/python3", "python3.10"),
        E::File("usr/lib/python3.10/os.py", b"# os"),
        E::File("usr/lib/x86_64-linux-gnu/libc.so.6", b"\x7fELF"),
    ])
}

/// A pytorch/pytorch-style image (conda in /opt/conda, torch from pip) whose tag says
/// torch 2.8 with CUDA 12.8 but which holds 2.4.1+cu124.
pub fn lying_pytorch_image(manifest_last: bool) -> Vec<u8> {
    let sp = "opt/conda/lib/python3.11/site-packages";
    let conda = layer(&[
        E::File("opt/conda/bin/python3.11", b"\x7fELF"),
        E::Symlink("opt/conda/bin/python", "python3.11"),
        E::File(
            "opt/conda/conda-meta/python-3.11.9-hb806964_0_cpython.json",
            b"{}",
        ),
        E::File("opt/conda/lib/python3.11/os.py", b"# os"),
        E::Dir(sp),
    ]);
    let torch_files = [
        (
            format!("{sp}/torch/version.py"),
            version_py("2.4.1+cu124", Some("12.4")),
        ),
        (
            format!("{sp}/torch-2.4.1+cu124.dist-info/METADATA"),
            torch_metadata(
                "2.4.1+cu124",
                &[
                    "nvidia-cudnn-cu12==9.1.0.70",
                    "nvidia-nccl-cu12==2.20.5",
                    "nvidia-cuda-runtime-cu12==12.4.127",
                ],
            ),
        ),
        (format!("{sp}/torch/nn/functional.py"), b"# big".to_vec()),
        (
            format!("{sp}/torchvision/version.py"),
            b"__version__ = '0.19.1+cu124'\ncuda = '12.4'\n".to_vec(),
        ),
        (
            format!("{sp}/nvidia/cudnn/lib/libcudnn.so.9"),
            b"\x7fELF".to_vec(),
        ),
        (format!("{sp}/nvidia/nccl/lib/libnccl.so.2"), b"\x7fELF".to_vec()),
        (
            format!("{sp}/nvidia_cudnn_cu12-9.1.0.70.dist-info/METADATA"),
            b"Name: nvidia-cudnn-cu12\n".to_vec(),
        ),
        (
            format!("{sp}/nvidia_nccl_cu12-2.20.5.dist-info/METADATA"),
            b"Name: nvidia-nccl-cu12\n".to_vec(),
        ),
        (
            format!("{sp}/nvidia_cuda_runtime_cu12-12.4.127.dist-info/METADATA"),
            b"Name: nvidia-cuda-runtime-cu12\n".to_vec(),
        ),
        (
            format!("{sp}/numpy-1.26.4.dist-info/METADATA"),
            b"Name: numpy\n".to_vec(),
        ),
    ];
    let entries: Vec<E> = torch_files.iter().map(|(p, d)| E::File(p, d)).collect();
    let pip = layer(&entries);
    let c = Config {
        env: vec![
            "PATH=/opt/conda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "NVIDIA_VISIBLE_DEVICES=all",
            "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
            "LD_LIBRARY_PATH=/usr/local/nvidia/lib:/usr/local/nvidia/lib64",
            "PYTORCH_VERSION=2.8.0",
        ],
        labels: vec![("com.nvidia.volumes.needed", "nvidia_driver")],
        ..Default::default()
    };
    docker_save_legacy(
        "pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime",
        &c,
        &[base_layer(), conda, pip],
        manifest_last,
    )
}

#[test]
fn a_lying_pytorch_image_is_read_as_it_is() {
    for manifest_last in [false, true] {
        let img = read(&lying_pytorch_image(manifest_last));
        assert_eq!(img.layers.len(), 3);
        assert_eq!(img.names, ["pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime"]);
        let f = img.facts();
        assert_eq!(f.platform, "linux/amd64");
        let os = f.os.as_ref().unwrap();
        assert_eq!((os.id.as_str(), os.version_id.as_str()), ("ubuntu", "22.04"));
        assert_eq!(os.source, "/etc/os-release");
        // Two Pythons: the system 3.10 and conda's 3.11 (exact from conda-meta).
        let versions: Vec<_> = f
            .pythons
            .iter()
            .map(|p| (p.prefix.as_str(), p.version.as_str()))
            .collect();
        assert_eq!(versions, [("/opt/conda", "3.11"), ("/usr", "3.10")]);
        let conda = &f.pythons[0];
        assert_eq!(conda.exact.as_ref().unwrap().value, "3.11.9");
        assert_eq!(conda.site_packages, ["/opt/conda/lib/python3.11/site-packages"]);
        assert_eq!(conda.executables, ["/opt/conda/bin/python3.11"]);
        // torch as it is, not as the tag says.
        assert_eq!(f.torch.len(), 1);
        let t = &f.torch[0];
        assert_eq!(t.version.as_ref().unwrap().value, "2.4.1+cu124");
        assert_eq!(
            t.version.as_ref().unwrap().source,
            "/opt/conda/lib/python3.11/site-packages/torch/version.py"
        );
        assert_eq!(t.cuda.as_ref().unwrap().value, "12.4");
        assert_eq!(t.cuda_version().unwrap().major_minor(), (12, 4));
        assert!(!t.cpu_only);
        assert_eq!(t.python.as_deref(), Some("3.11"));
        assert_eq!(
            t.pin("nvidia-cudnn-cu12").unwrap().exact.as_deref(),
            Some("9.1.0.70")
        );
        assert_eq!(
            t.pin("nvidia-nccl-cu12").unwrap().exact.as_deref(),
            Some("2.20.5")
        );
        assert_eq!(t.pins.len(), 3);
        assert_eq!(t.torchvision.as_ref().unwrap().value, "0.19.1+cu124");
        assert_eq!(t.dist_version.as_ref().unwrap().value, "2.4.1+cu124");
        // cuDNN and NCCL come from pip wheels.
        assert_eq!(f.cudnn.pip[0].value, "9.1.0.70");
        assert_eq!(f.cudnn.libraries[0].origin, LibOrigin::PipWheel);
        assert_eq!(f.cudnn.libraries[0].version.as_deref(), Some("9"));
        assert_eq!(f.nccl.pip[0].value, "2.20.5");
        assert!(
            f.packages.iter().all(|p| p.name != "numpy"),
            "only relevant packages"
        );
        assert!(f.cuda_toolkits.is_empty());
        assert_eq!(f.env.pytorch_version.as_deref(), Some("2.8.0"));
        assert_eq!(f.labels["com.nvidia.volumes.needed"], "nvidia_driver");

        // The tag's claims against what is there.
        let claims = claims::from_tag(&img.names[0]).unwrap();
        let checks = claims.compare(&f);
        let by = |c: &str| checks.iter().find(|k| k.component == c).unwrap();
        assert_eq!(by("torch").matches, Some(false));
        assert_eq!(by("cuda").matches, Some(false));
        assert_eq!(by("cudnn").matches, Some(true));
        // And an --expect that matches loosely.
        let ok = claims::parse_expect("torch=2.4,cuda=12.4,python=3.11,cudnn=9").unwrap();
        assert!(
            ok.compare(&f).iter().all(|c| c.matches == Some(true)),
            "{:?}",
            ok.compare(&f)
        );
    }
}

#[test]
fn a_later_layer_replaces_torch_through_whiteouts() {
    let sp = "usr/local/lib/python3.10/dist-packages";
    let old = layer(&[
        E::File(
            &format!("{sp}/torch/version.py"),
            &version_py("2.3.0+cu121", Some("12.1")),
        ),
        E::File(
            &format!("{sp}/torch-2.3.0+cu121.dist-info/METADATA"),
            &torch_metadata("2.3.0+cu121", &[]),
        ),
        E::File(&format!("{sp}/torch/lib/libcudnn.so.8"), b"\x7fELF"),
    ]);
    let new = layer(&[
        E::Whiteout(&format!("{sp}/torch")),
        E::Whiteout(&format!("{sp}/torch-2.3.0+cu121.dist-info")),
        E::File(
            &format!("{sp}/torch/version.py"),
            &version_py("2.5.1", Some("12.4")),
        ),
        E::File(
            &format!("{sp}/torch-2.5.1.dist-info/METADATA"),
            &torch_metadata("2.5.1", &["nvidia-cudnn-cu12==9.1.0.70"]),
        ),
    ]);
    let base = base_layer();
    for compress in [gzip as fn(&[u8]) -> Vec<u8>, zstd] {
        let stored: Vec<Vec<u8>> = [&base, &old, &new].iter().map(|l| compress(l)).collect();
        let img = oci_image(
            &Config::default(),
            &[base.clone(), old.clone(), new.clone()],
            &stored,
        );
        let desc = manifest_descriptor(&img.manifest, Some(("linux", "amd64")), Some("v1"));
        for index_last in [false, true] {
            let bytes = oci_archive(std::slice::from_ref(&img), vec![desc.clone()], index_last);
            let image = read(&bytes);
            let f = image.facts();
            assert_eq!(f.torch.len(), 1, "{:?}", f.torch);
            let t = &f.torch[0];
            assert_eq!(t.version.as_ref().unwrap().value, "2.5.1");
            assert_eq!(t.dist_version.as_ref().unwrap().value, "2.5.1");
            assert_eq!(t.pins[0].name, "nvidia-cudnn-cu12");
            assert!(f.cudnn.libraries.is_empty(), "torch/lib went with the old torch");
            assert!(
                !image
                    .fs
                    .exists(&format!("{sp}/torch-2.3.0+cu121.dist-info/METADATA"))
            );
            assert_eq!(image.names, ["v1"]);
            assert!(image.manifest_digest.is_some());
            // Debian's /usr/local dist-packages belongs to the /usr Python 3.10.
            assert_eq!(f.pythons.len(), 1);
            assert_eq!(f.pythons[0].site_packages, [format!("/{sp}")]);
        }
    }
}

#[test]
fn an_opaque_directory_hides_what_was_below() {
    let l1 = layer(&[
        E::File("opt/conda/lib/python3.11/os.py", b""),
        E::File(
            "opt/conda/lib/python3.11/site-packages/torch/version.py",
            &version_py("2.1.0", Some("12.1")),
        ),
    ]);
    let l2 = layer(&[
        E::Opaque("opt/conda"),
        E::File("opt/conda/lib/python3.12/os.py", b""),
        E::File("opt/conda/bin/python3.12", b""),
    ]);
    let img = read(&docker_save_legacy("x:1", &Config::default(), &[l1, l2], true));
    let f = img.facts();
    assert!(f.torch.is_empty(), "{:?}", f.torch);
    assert_eq!(f.pythons.len(), 1);
    assert_eq!(f.pythons[0].version, "3.12");
}

/// A compat libcuda: an ELF magic, filler, and the `.note.cuda.fwd_compatibility` note.
fn compat_lib(json: &str) -> Vec<u8> {
    let owner = b"NVIDIA Corporation\0";
    let mut out = b"\x7fELF\x02\x01\x01\0".to_vec();
    out.extend(std::iter::repeat_n(0x90u8, 70_000));
    out.extend_from_slice(&(owner.len() as u32).to_le_bytes());
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(owner);
    out.push(0);
    out.extend_from_slice(json.as_bytes());
    out.extend(std::iter::repeat_n(0x90u8, 5000));
    out
}

/// An NGC-style image in the Docker 25+ `docker save` layout.
pub fn ngc_image() -> Vec<u8> {
    ngc_image_named("nvcr.io/nvidia/pytorch:25.01-py3")
}

/// [`ngc_image`] under another name (a mirror's).
pub fn ngc_image_named(name: &str) -> Vec<u8> {
    let sp = "usr/local/lib/python3.12/dist-packages";
    let base = layer(&[
        E::File("usr/lib/os-release", UBUNTU_2404),
        E::Symlink("etc/os-release", "../usr/lib/os-release"),
        E::File("usr/bin/python3.12", b""),
        E::File("usr/lib/python3.12/os.py", b""),
    ]);
    let cuda = layer(&[
        E::Dir("usr/local/cuda-12.8"),
        E::Symlink("usr/local/cuda", "cuda-12.8"),
        E::File(
            "usr/local/cuda-12.8/version.json",
            br#"{"cuda": {"name": "CUDA SDK", "version": "12.8.0"}, "cuda_cudart": {"name": "CUDA Runtime (cudart)", "version": "12.8.57"}}"#,
        ),
        E::File("usr/local/cuda-12.8/bin/nvcc", b"\x7fELF"),
        E::File("usr/local/cuda-12.8/targets/x86_64-linux/lib/libcudart.so.12.8.57", b"\x7fELF"),
        E::Symlink("usr/local/cuda-12.8/targets/x86_64-linux/lib/libcudart.so.12", "libcudart.so.12.8.57"),
        E::File(
            "usr/local/cuda-12.8/compat/libcuda.so.570.86.10",
            &compat_lib(r#"{"Format":1,"CUDA Version":"12.8","Driver":[535,550,560,565,570],"Device":[1,2,7,8,9,10]}"#),
        ),
        E::Symlink("usr/local/cuda-12.8/compat/libcuda.so.1", "libcuda.so.570.86.10"),
        E::File(
            "usr/include/x86_64-linux-gnu/cudnn_version_v9.h",
            b"#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 7\n#define CUDNN_PATCHLEVEL 0\n",
        ),
        E::File("usr/lib/x86_64-linux-gnu/libcudnn.so.9.7.0", b"\x7fELF"),
        E::Symlink("usr/lib/x86_64-linux-gnu/libcudnn.so.9", "libcudnn.so.9.7.0"),
        E::File("usr/include/nccl.h", b"#define NCCL_MAJOR 2\n#define NCCL_MINOR 25\n#define NCCL_PATCH 1\n"),
        E::File("usr/lib/x86_64-linux-gnu/libnccl.so.2.25.1", b"\x7fELF"),
    ]);
    let torch = layer(&[E::File(
        &format!("{sp}/torch/version.py"),
        &version_py("2.6.0a0+ecf3bae40a.nv25.1", Some("12.8")),
    )]);
    let c = Config {
        env: vec![
            "NVIDIA_PYTORCH_VERSION=25.01",
            "PYTORCH_VERSION=2.6.0a0+ecf3bae",
            "CUDA_VERSION=12.8.0.038",
            "CUDNN_VERSION=9.7.0.66",
            "NCCL_VERSION=2.25.1",
            "NVIDIA_REQUIRE_CUDA=cuda>=9.0",
        ],
        entrypoint: Some(vec!["/opt/nvidia/nvidia_entrypoint.sh"]),
        user: Some(""),
        ..Default::default()
    };
    docker_save_oci(name, &c, &[base, cuda, torch])
}

#[test]
fn an_ngc_image_in_the_docker_25_layout() {
    let img = read(&ngc_image());
    assert_eq!(img.layout, gpuenv::image::archive::Layout::DockerOci);
    let f = img.facts();
    assert_eq!(f.os.as_ref().unwrap().version_id, "24.04");
    let t = &f.torch[0];
    assert_eq!(t.version.as_ref().unwrap().value, "2.6.0a0+ecf3bae40a.nv25.1");
    assert_eq!(t.site_packages, "/usr/local/lib/python3.12/dist-packages");
    assert!(t.pins.is_empty());
    assert_eq!(f.pythons.len(), 1);
    assert_eq!(f.pythons[0].prefix, "/usr");
    // The toolkit, through its directory and the /usr/local/cuda link.
    let tk: Vec<_> = f
        .cuda_toolkits
        .iter()
        .map(|k| {
            (
                k.root.as_str(),
                k.version.as_ref().map(|v| v.value.to_string()),
                k.nvcc.is_some(),
            )
        })
        .collect();
    assert_eq!(
        tk,
        [
            ("/usr/local/cuda", Some("12.8.0".to_string()), true),
            ("/usr/local/cuda-12.8", Some("12.8.0".to_string()), true)
        ]
    );
    assert_eq!(f.cuda_toolkits[0].link_target.as_deref(), Some("cuda-12.8"));
    assert_eq!(f.cudart.len(), 1);
    assert_eq!(f.cudart[0].version.as_deref(), Some("12.8.57"));
    assert_eq!(f.cudart[0].origin, LibOrigin::CudaToolkit);
    // cuDNN from the header, the library name and the env; NCCL likewise.
    assert_eq!(f.cudnn.headers[0].value.to_string(), "9.7.0");
    assert_eq!(
        f.cudnn.headers[0].source,
        "/usr/include/x86_64-linux-gnu/cudnn_version_v9.h"
    );
    assert_eq!(f.cudnn.libraries.len(), 1, "the symlink is not a second cuDNN");
    assert_eq!(f.cudnn.libraries[0].origin, LibOrigin::System);
    assert_eq!(f.cudnn.declared[0].value.to_string(), "9.7.0.66");
    assert_eq!(f.nccl.headers[0].value.to_string(), "2.25.1");
    assert_eq!(f.nccl.libraries[0].version.as_deref(), Some("2.25.1"));
    // cuda-compat: the driver from the name, the host branches from the ELF note.
    assert_eq!(f.cuda_compat.len(), 1);
    let compat = &f.cuda_compat[0];
    assert_eq!(compat.driver.as_ref().unwrap().branch(), 570);
    let note = compat.note.as_ref().unwrap();
    assert_eq!(note.cuda_version.as_deref(), Some("12.8"));
    assert_eq!(note.driver_branches, [535, 550, 560, 565, 570]);
    // The config.
    assert_eq!(f.env.nvidia_pytorch_version.as_deref(), Some("25.01"));
    assert_eq!(f.env.cuda_version.as_ref().unwrap().value.to_string(), "12.8.0");
    assert_eq!(f.env.require[0].value, "cuda>=9.0");
    assert_eq!(
        f.entrypoint.as_deref(),
        Some(&["/opt/nvidia/nvidia_entrypoint.sh".to_string()][..])
    );
    // NGC's requirement never stops a container, whatever the driver.
    let old = HostTarget {
        cuda: Some("11.4".parse().unwrap()),
        driver: Some("470.223.02".parse().unwrap()),
        gpus: vec![GpuTarget {
            arch: Some("8.0".parse().unwrap()),
            brand: Some("tesla".into()),
        }],
    };
    assert!(evaluate(&img.config.env_pairs(), &old).satisfied);
    assert_eq!(
        claims::from_tag(&img.names[0]).unwrap().ngc_release.as_deref(),
        Some("25.01")
    );
    // The whole facts document serializes.
    let doc = serde_json::to_value(&f).unwrap();
    assert_eq!(
        doc["torch"][0]["version"]["source"],
        json!("/usr/local/lib/python3.12/dist-packages/torch/version.py")
    );
}

#[test]
fn an_nvidia_cuda_devel_image_against_hosts() {
    let l = layer(&[
        E::File("usr/lib/os-release", UBUNTU_2204),
        E::HardLink("etc/os-release", "usr/lib/os-release"),
        E::File(
            "usr/local/cuda-12.4/version.json",
            br#"{"cuda": {"name": "CUDA SDK", "version": "12.4.1"}}"#,
        ),
        E::File("usr/local/cuda-12.4/bin/nvcc", b""),
        E::File("usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0", b""),
        E::File("usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5", b""),
        E::File(
            "usr/local/cuda-12.4/compat/libcuda.so.550.54.15",
            b"\x7fELF no note here",
        ),
    ]);
    let c = Config {
        env: vec![
            "CUDA_VERSION=12.4.1",
            REQUIRE_12_4_1,
            "NV_CUDNN_VERSION=9.1.0.70-1",
            "NCCL_VERSION=2.21.5-1",
        ],
        labels: vec![("com.nvidia.cudnn.version", "9.1.0.70-1")],
        ..Default::default()
    };
    let img = read(&docker_save_legacy(
        "nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04",
        &c,
        &[l],
        false,
    ));
    let f = img.facts();
    assert_eq!(
        f.os.as_ref().unwrap().version_id,
        "22.04",
        "read through a hard link"
    );
    assert_eq!(f.cudnn.declared.len(), 2);
    assert_eq!(
        f.cudnn.declared[1].source,
        "label com.nvidia.cudnn.version=9.1.0.70-1"
    );
    assert_eq!(f.nccl.declared[0].value.to_string(), "2.21.5");
    assert_eq!(f.cuda_compat[0].note, None);
    let checks = claims::from_tag(&img.names[0]).unwrap().compare(&f);
    assert!(checks.iter().all(|c| c.matches == Some(true)), "{checks:?}");
    assert_eq!(
        checks.iter().map(|c| c.component).collect::<Vec<_>>(),
        ["cuda", "cudnn", "os", "devel"]
    );

    let h100_r535 = HostTarget {
        cuda: Some("12.2".parse().unwrap()),
        driver: Some("535.104.05".parse().unwrap()),
        gpus: vec![GpuTarget {
            arch: Some("9.0".parse().unwrap()),
            brand: Some("nvidia".into()),
        }],
    };
    assert!(evaluate(&img.config.env_pairs(), &h100_r535).satisfied);
    let rtx_r545 = HostTarget {
        cuda: Some("12.3".parse().unwrap()),
        driver: Some("545.29.06".parse().unwrap()),
        gpus: vec![GpuTarget {
            arch: Some("8.9".parse().unwrap()),
            brand: Some("geforcertx".into()),
        }],
    };
    let out = evaluate(&img.config.env_pairs(), &rtx_r545);
    assert!(!out.satisfied);
    assert!(
        out.checks[0]
            .message
            .as_deref()
            .unwrap()
            .contains("unsatisfied condition: cuda>=12.4,")
    );
}

#[test]
fn platforms_are_picked_from_an_index() {
    let amd = layer(&[E::File("etc/os-release", UBUNTU_2204)]);
    let arm = layer(&[E::File("etc/os-release", UBUNTU_2404)]);
    let a = oci_image(
        &Config {
            architecture: Some("amd64"),
            ..Default::default()
        },
        std::slice::from_ref(&amd),
        &[gzip(&amd)],
    );
    let b = oci_image(
        &Config {
            architecture: Some("arm64"),
            ..Default::default()
        },
        std::slice::from_ref(&arm),
        &[gzip(&arm)],
    );
    // A nested index (a manifest list as its own blob), and an attestation beside it.
    let list = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            manifest_descriptor(&b.manifest, Some(("linux", "arm64")), None),
            manifest_descriptor(&a.manifest, Some(("linux", "amd64")), None),
            manifest_descriptor(&a.manifest, Some(("unknown", "unknown")), None),
        ],
    }))
    .unwrap();
    let mut list_desc = manifest_descriptor(&list, None, Some("multi"));
    list_desc["mediaType"] = json!("application/vnd.oci.image.index.v1+json");
    let list_blob = Oci {
        members: vec![(
            format!("blobs/sha256/{}", gpuenv::image::digest::sha256(&list).hex()),
            list.clone(),
        )],
        manifest: list,
        config: Vec::new(),
    };
    let bytes = oci_archive(&[a, b, list_blob], vec![list_desc], true);
    let img = read(&bytes);
    assert_eq!(img.facts().os.unwrap().version_id, "22.04");
    assert_eq!(img.config.architecture.as_deref(), Some("amd64"));
    let opts = for_platform("arm64", Some("v8"));
    let img = both(&bytes, &opts).unwrap();
    assert_eq!(img.facts().os.unwrap().version_id, "24.04");
    let opts = for_platform("s390x", None);
    let e = both(&bytes, &opts).unwrap_err();
    assert!(
        e.to_string()
            .contains("no image for linux/s390x; it has: linux/arm64, linux/amd64"),
        "{e}"
    );
}

#[test]
fn an_archive_file_reads_only_the_chosen_images_layers() {
    let amd = layer(&[E::File("etc/os-release", UBUNTU_2204)]);
    let arm = layer(&[E::File("etc/os-release", UBUNTU_2404)]);
    let image = |arch, l: &Vec<u8>| {
        oci_image(
            &Config {
                architecture: Some(arch),
                ..Default::default()
            },
            std::slice::from_ref(l),
            &[gzip(l)],
        )
    };
    let (a, mut b) = (image("amd64", &amd), image("arm64", &arm));
    // The arm64 layer is replaced where it lies: a good layer, but its bytes no longer
    // hash to its name.
    let arm_layer = format!(
        "blobs/sha256/{}",
        gpuenv::image::digest::sha256(&gzip(&arm)).hex()
    );
    for (path, data) in &mut b.members {
        if *path == arm_layer {
            *data = gzip(&layer(&[E::File("etc/os-release", b"ID=tampered\n")]));
        }
    }
    let descs = vec![
        manifest_descriptor(&a.manifest, Some(("linux", "amd64")), None),
        manifest_descriptor(&b.manifest, Some(("linux", "arm64")), None),
    ];
    let bytes = oci_archive(&[a, b], descs, false);
    let mut file = tempfile::tempfile().unwrap();
    std::io::Write::write_all(&mut file, &bytes).unwrap();
    // One pass reads every blob as it passes, so it meets the damage; the file is read by
    // its index, and the damaged layer is not amd64's.
    let e = read_archive(&bytes[..], &ReadOptions::default()).unwrap_err();
    assert!(matches!(e.root(), ImageError::DigestMismatch { .. }), "{e}");
    let img = read_archive_file(&file, &ReadOptions::default()).unwrap();
    assert_eq!(img.facts().os.unwrap().version_id, "22.04");
    // For arm64 the file read meets it too.
    let opts = for_platform("arm64", None);
    let e = read_archive_file(&file, &opts).unwrap_err();
    assert!(matches!(e.root(), ImageError::DigestMismatch { .. }), "{e}");
    assert!(e.to_string().starts_with("layer 1 ("), "{e}");
}

#[test]
fn an_archive_file_cut_short_is_refused() {
    let whole = lying_pytorch_image(false);
    // Cut inside the last member's data: its header declares bytes the file does not have.
    let mut file = tempfile::tempfile().unwrap();
    std::io::Write::write_all(&mut file, &whole[..whole.len() - 3000]).unwrap();
    let e = read_archive_file(&file, &ReadOptions::default()).unwrap_err();
    assert!(matches!(e.root(), ImageError::Truncated { .. }), "{e}");
    assert!(e.to_string().contains("past the end of the file"), "{e}");
    assert!(e.is_bad_input());
}

#[test]
fn an_oci_layout_directory() {
    let l = layer(&[E::File("etc/os-release", UBUNTU_2204)]);
    let img = oci_image(&Config::default(), std::slice::from_ref(&l), &[zstd(&l)]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("blobs/sha256")).unwrap();
    for (path, data) in &img.members {
        std::fs::write(dir.path().join(path), data).unwrap();
    }
    let index = json!({"schemaVersion": 2, "manifests": [manifest_descriptor(&img.manifest, None, None)]});
    std::fs::write(dir.path().join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    let read = read_oci_dir(dir.path(), &ReadOptions::default()).unwrap();
    assert_eq!(read.facts().os.unwrap().id, "ubuntu");
    assert_eq!(
        read.layers[0].compression,
        gpuenv::image::layer::Compression::Zstd
    );
    // A blob that changed on disk is caught: of another size than its descriptor says,
    // before it is read; of the same size, by its digest.
    let layer_path = dir.path().join(format!(
        "blobs/sha256/{}",
        gpuenv::image::digest::sha256(&zstd(&l)).hex()
    ));
    std::fs::write(
        &layer_path,
        zstd(&layer(&[E::File("etc/os-release", UBUNTU_2404)])),
    )
    .unwrap();
    let e = read_oci_dir(dir.path(), &ReadOptions::default()).unwrap_err();
    assert!(matches!(e.root(), ImageError::Malformed { .. }), "{e}");
    assert!(e.to_string().contains("the descriptor says"), "{e}");
    std::fs::remove_file(&layer_path).unwrap();
    let e = read_oci_dir(dir.path(), &ReadOptions::default()).unwrap_err();
    assert!(e.to_string().contains("missing"), "{e}");
    let e = read_oci_dir(&dir.path().join("nope"), &ReadOptions::default()).unwrap_err();
    assert!(e.to_string().contains("not an OCI image layout"), "{e}");

    // Of the same size, by its digest: a plain tar layer with one byte of a file changed.
    let plain = oci_image(
        &Config::default(),
        std::slice::from_ref(&l),
        std::slice::from_ref(&l),
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("blobs/sha256")).unwrap();
    for (path, data) in &plain.members {
        std::fs::write(dir.path().join(path), data).unwrap();
    }
    let index = json!({"schemaVersion": 2, "manifests": [manifest_descriptor(&plain.manifest, None, None)]});
    std::fs::write(dir.path().join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    assert!(read_oci_dir(dir.path(), &ReadOptions::default()).is_ok());
    let mut tampered = l.clone();
    let at = tampered
        .windows(5)
        .position(|w| w == b"Jammy")
        .expect("the file's text in the layer");
    tampered[at] = b'X';
    std::fs::write(
        dir.path().join(format!(
            "blobs/sha256/{}",
            gpuenv::image::digest::sha256(&l).hex()
        )),
        tampered,
    )
    .unwrap();
    let e = read_oci_dir(dir.path(), &ReadOptions::default()).unwrap_err();
    assert!(matches!(e.root(), ImageError::DigestMismatch { .. }), "{e}");
}

// ---------------------------------------------------------------------------------------
// Hostile archives: a clear error each, never a panic.

fn one_layer_archive(stored: Vec<u8>, uncompressed: Vec<u8>) -> Vec<u8> {
    let img = oci_image(&Config::default(), &[uncompressed], std::slice::from_ref(&stored));
    let desc = manifest_descriptor(&img.manifest, None, None);
    oci_archive(&[img], vec![desc], false)
}

#[test]
fn path_traversal_is_refused() {
    // The tar crate refuses to write `..`, so the header is written by hand.
    let mut h = tar::Header::new_gnu();
    h.as_gnu_mut().unwrap().name[..16].copy_from_slice(b"../../etc/passwd");
    h.set_size(4);
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::Regular);
    h.set_cksum();
    let mut l = h.as_bytes().to_vec();
    l.extend_from_slice(b"root");
    l.extend(std::iter::repeat_n(0u8, 508 + 1024));
    let e = read_err(&one_layer_archive(l.clone(), l.clone()));
    assert!(matches!(e.root(), ImageError::PathTraversal { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("`../../etc/passwd` escapes the image root"),
        "{e}"
    );
    assert!(e.is_bad_input());
    // A hard link out of the root too.
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Link);
    h.set_size(0);
    h.as_gnu_mut().unwrap().linkname[..11].copy_from_slice(b"../../../x\0");
    h.set_path("a").unwrap();
    h.set_cksum();
    b.append(&h, &[][..]).unwrap();
    let l = b.into_inner().unwrap();
    let e = read_err(&one_layer_archive(l.clone(), l));
    assert!(matches!(e.root(), ImageError::PathTraversal { .. }), "{e}");
    // And in the outer archive's own manifest.
    let manifest = br#"[{"Config":"c.json","RepoTags":["x:1"],"Layers":["../../layer.tar"]}]"#.to_vec();
    let bytes = archive(&[
        ("manifest.json".into(), manifest),
        ("c.json".into(), b"{}".to_vec()),
    ]);
    let e = read_err(&bytes);
    assert!(matches!(e.root(), ImageError::PathTraversal { .. }), "{e}");
}

#[test]
fn absurd_sizes_are_refused() {
    // A header declaring 100 GiB, with nothing behind it.
    let mut h = tar::Header::new_gnu();
    h.set_path("usr/lib/huge.bin").unwrap();
    h.set_size(100 << 30);
    h.set_entry_type(tar::EntryType::Regular);
    h.set_cksum();
    let l = h.as_bytes().to_vec();
    let e = read_err(&one_layer_archive(l.clone(), l));
    assert!(matches!(e.root(), ImageError::TooLarge { .. }), "{e}");
    assert!(e.to_string().contains("usr/lib/huge.bin"), "{e}");
    // A version.py of 2 MiB is not a version.py.
    let big = vec![b'#'; 2 << 20];
    let l = layer(&[E::File("usr/lib/python3.10/site-packages/torch/version.py", &big)]);
    let e = read_err(&one_layer_archive(gzip(&l), l));
    assert!(e.to_string().contains("a file whose contents are read"), "{e}");
    // The whole-image bound on recorded entries.
    let names: Vec<String> = (0..50).map(|i| format!("usr/lib/libcudnn.so.9.{i}")).collect();
    let entries: Vec<E> = names.iter().map(|n| E::File(n, b"")).collect();
    let l = layer(&entries);
    let opts = ReadOptions {
        limits: Limits {
            max_recorded: 10,
            ..Limits::default()
        },
        ..Default::default()
    };
    let e = both(&one_layer_archive(l.clone(), l)[..], &opts).unwrap_err();
    assert!(matches!(e.root(), ImageError::Budget { .. }), "{e}");
    // The bound is the whole image's, though layers of a file are read on several threads:
    // three layers of 5 entries each break a bound of 12 that no one of them breaks.
    let layers: Vec<Vec<u8>> = (0..3)
        .map(|l| {
            let names: Vec<String> = (0..5).map(|i| format!("usr/lib/{l}/libnccl.so.2.{i}")).collect();
            layer(&names.iter().map(|n| E::File(n, b"")).collect::<Vec<_>>())
        })
        .collect();
    let opts = ReadOptions {
        limits: Limits {
            max_recorded: 12,
            ..Limits::default()
        },
        ..Default::default()
    };
    let bytes = docker_save_oci("x:1", &Config::default(), &layers);
    let e = both(&bytes, &opts).unwrap_err();
    assert!(matches!(e.root(), ImageError::Budget { .. }), "{e}");
    let opts = ReadOptions {
        limits: Limits {
            max_recorded: 15,
            ..Limits::default()
        },
        ..Default::default()
    };
    assert!(both(&bytes, &opts).is_ok());
}

#[test]
fn truncated_and_corrupt_streams_are_refused() {
    let l = layer(&[
        E::File("etc/os-release", UBUNTU_2204),
        E::File("usr/bin/python3.10", &[7u8; 5000]),
    ]);
    // A gzip cut in the middle: the blob's name is its digest, so rename it to match the
    // cut bytes; only the stream itself can tell.
    let gz = gzip(&l);
    let cut = gz[..gz.len() / 2].to_vec();
    let e = read_err(&one_layer_archive(cut, l.clone()));
    assert!(matches!(e.root(), ImageError::Truncated { .. }), "{e}");
    // zstd with its frame damaged.
    let mut zs = zstd(&l);
    let n = zs.len();
    for b in &mut zs[n / 3..n / 3 + 16] {
        *b ^= 0x5a;
    }
    let e = read_err(&one_layer_archive(zs, l.clone()));
    assert!(
        matches!(
            e.root(),
            ImageError::Corrupt { .. } | ImageError::Truncated { .. }
        ),
        "{e}"
    );
    // bzip2 is named, not misread.
    let e = read_err(&one_layer_archive(b"BZh91AY&SY....".to_vec(), l.clone()));
    assert!(e.to_string().contains("bzip2"), "{e}");
    // A corrupt tar header inside a good gzip.
    let mut bad = l.clone();
    bad[10] ^= 0xff;
    let e = read_err(&one_layer_archive(gzip(&bad), bad));
    assert!(e.to_string().contains("checksum"), "{e}");
    // The outer archive cut short.
    let whole = lying_pytorch_image(true);
    let e = read_err(&whole[..whole.len() - 3000]);
    assert!(matches!(e.root(), ImageError::Truncated { .. }), "{e}");
}

#[test]
fn digest_mismatches_are_refused() {
    let l = layer(&[E::File("etc/os-release", UBUNTU_2204)]);
    let other = layer(&[E::File("etc/os-release", UBUNTU_2404)]);
    // A blob stored under another blob's digest.
    let img = oci_image(
        &Config::default(),
        std::slice::from_ref(&l),
        std::slice::from_ref(&l),
    );
    let mut members = img.members.clone();
    for (path, data) in &mut members {
        if *data == l {
            *data = other.clone();
            assert!(path.starts_with("blobs/sha256/"));
        }
    }
    let desc = manifest_descriptor(&img.manifest, None, None);
    let bytes = oci_archive(
        &[Oci {
            members,
            manifest: img.manifest.clone(),
            config: img.config.clone(),
        }],
        vec![desc],
        false,
    );
    let e = read_err(&bytes);
    assert!(matches!(e, ImageError::DigestMismatch { .. }), "{e}");
    assert!(
        e.to_string().contains("digest mismatch for blob `blobs/sha256/"),
        "{e}"
    );
    // A legacy layer.tar that is not what the config's diff_ids say.
    let good = docker_save_legacy("x:1", &Config::default(), std::slice::from_ref(&l), false);
    let config = config_json(&Config::default(), std::slice::from_ref(&other));
    let config_name = format!("{}.json", gpuenv::image::digest::sha256(&config).hex());
    let manifest =
        serde_json::to_vec(&json!([{"Config": config_name, "RepoTags": ["x:1"], "Layers": ["l/layer.tar"]}]))
            .unwrap();
    let bytes = archive(&[
        ("manifest.json".into(), manifest),
        (config_name, config),
        ("l/layer.tar".into(), l.clone()),
    ]);
    let e = read_err(&bytes);
    assert!(e.to_string().contains("uncompressed"), "{e}");
    assert!(both(&good, &ReadOptions::default()).is_ok());
    // A legacy config whose name is not its digest.
    let config = config_json(&Config::default(), std::slice::from_ref(&l));
    let wrong = format!("{}.json", "0".repeat(64));
    let manifest =
        serde_json::to_vec(&json!([{"Config": wrong, "RepoTags": ["x:1"], "Layers": ["l/layer.tar"]}]))
            .unwrap();
    let bytes = archive(&[
        ("manifest.json".into(), manifest),
        (wrong, config),
        ("l/layer.tar".into(), l),
    ]);
    let e = read_err(&bytes);
    assert!(matches!(e, ImageError::DigestMismatch { .. }), "{e}");
}

#[test]
fn archives_that_are_not_images() {
    for (bytes, needle) in [
        (
            archive(&[("hello.txt".into(), b"hi".to_vec())]),
            "neither manifest.json",
        ),
        (
            archive(&[("manifest.json".into(), b"{".to_vec())]),
            "docker save manifest",
        ),
        (
            archive(&[("manifest.json".into(), b"[]".to_vec())]),
            "lists no image",
        ),
        (
            archive(&[(
                "manifest.json".into(),
                br#"[{"Config":"c.json","Layers":["x/layer.tar"]}]"#.to_vec(),
            )]),
            "config `c.json`, which is not in the archive",
        ),
        (
            archive(&[
                (
                    "manifest.json".into(),
                    br#"[{"Config":"c.json","Layers":["x/layer.tar"]}]"#.to_vec(),
                ),
                ("c.json".into(), b"{}".to_vec()),
            ]),
            "layer `x/layer.tar`, which is not in the archive",
        ),
        (
            b"not a tar at all, just text that is long enough to fill a header block...".repeat(8),
            "corrupt",
        ),
    ] {
        let e = read_err(&bytes);
        assert!(e.to_string().contains(needle), "{needle}: {e}");
        assert!(e.is_bad_input());
    }
    // Two images and no name.
    let l = layer(&[E::File("etc/os-release", UBUNTU_2204)]);
    let manifest = serde_json::to_vec(&json!([
        {"Config": "a.json", "RepoTags": ["a:1"], "Layers": []},
        {"Config": "b.json", "RepoTags": ["b:1"], "Layers": []},
    ]))
    .unwrap();
    let bytes = archive(&[("manifest.json".into(), manifest), ("l/layer.tar".into(), l)]);
    let e = read_err(&bytes);
    assert!(
        e.to_string().contains("holds 2 images; name one: a:1, b:1"),
        "{e}"
    );
}

#[test]
fn only_what_detection_needs_is_kept() {
    // torch's site-packages holds ~15 000 files; the merged view keeps a handful.
    let sp = "opt/conda/lib/python3.11/site-packages";
    let names: Vec<String> = (0..5000).map(|i| format!("{sp}/torch/_ops/op_{i}.py")).collect();
    let mut entries: Vec<E> = names.iter().map(|n| E::File(n, b"x = 1\n")).collect();
    let vp = version_py("2.4.1", Some("12.1"));
    let vpath = format!("{sp}/torch/version.py");
    entries.push(E::File(&vpath, &vp));
    let l = layer(&entries);
    let img = read(&one_layer_archive(gzip(&l), l));
    let kept: Vec<&str> = img.fs.paths().collect();
    assert_eq!(kept, [vpath.as_str()]);
    assert_eq!(img.facts().torch[0].version.as_ref().unwrap().value, "2.4.1");
}
