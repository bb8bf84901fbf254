//! An [`Engine`] that answers from memory, for unit tests of what runs on an Engine.

use std::cell::RefCell;
use std::collections::BTreeMap;

use super::{
    Credentials, DockerError, Engine, Fetched, ImageConfigDoc, ImageDetails, PathReader, PathStat, Progress,
    Reference,
};
use crate::deadline::Deadline;

/// A scripted Engine: builds replay `build_events` then give `build_result`; the registry
/// announces `announced`; pulls replay `pull_events` (by default one layer `aaaa` of 100
/// bytes going to `Pull complete`; a watcher's error stops them), then report
/// `pulled_digest` (or fail with `pull_error`) and leave an image whose repo digest is
/// `held_digest`. Every call is recorded.
#[derive(Default)]
pub(crate) struct Fake {
    pub images: RefCell<BTreeMap<String, ImageDetails>>,
    pub build_events: Vec<Progress>,
    pub build_result: Option<Result<String, DockerError>>,
    pub announced: Option<Result<String, DockerError>>,
    pub pulled_digest: Option<String>,
    pub held_digest: Option<String>,
    pub pull_error: Option<DockerError>,
    /// What removing an image or a container answers instead of success.
    pub remove_error: Option<DockerError>,
    /// The image each image was built on.
    pub parents: BTreeMap<String, String>,
    pub pull_events: Option<Vec<Progress>>,
    /// Images whose files are read path by path ([`Engine::open_paths`]), by name.
    pub trees: BTreeMap<String, Tree>,
    pub calls: RefCell<Vec<String>>,
}

/// A fake image's configuration, names and files, by absolute path.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tree {
    pub config: Vec<u8>,
    pub names: Vec<String>,
    pub nodes: BTreeMap<String, Node>,
}

/// A path of a fake image.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    File(Vec<u8>),
    Dir,
    /// A symbolic link to this absolute path.
    Link(String),
}

impl Tree {
    /// The path with every link on the way followed, as the daemon resolves it inside the
    /// container's root (at most 40 links, as the kernel allows).
    fn resolve(&self, path: &str) -> Option<String> {
        let mut done = String::new();
        let mut rest: Vec<String> = path
            .split('/')
            .filter(|c| !c.is_empty())
            .map(String::from)
            .collect();
        rest.reverse();
        let mut hops = 0;
        while let Some(c) = rest.pop() {
            let next = format!("{done}/{c}");
            match self.nodes.get(&next)? {
                Node::Link(target) => {
                    hops += 1;
                    if hops > 40 {
                        return None;
                    }
                    done.clear();
                    let mut t: Vec<String> = target
                        .split('/')
                        .filter(|c| !c.is_empty())
                        .map(String::from)
                        .collect();
                    t.reverse();
                    rest.extend(t);
                }
                _ => done = next,
            }
        }
        Some(if done.is_empty() { "/".into() } else { done })
    }

    /// The node at `path`, its last component not followed.
    fn node(&self, path: &str) -> Option<(String, &Node)> {
        let path = path.trim_end_matches('/');
        let (parent, last) = path.rsplit_once('/')?;
        let parent = if parent.is_empty() {
            "/".to_string()
        } else {
            self.resolve(parent)?
        };
        let at = format!("{}/{last}", parent.trim_end_matches('/'));
        self.nodes.get(&at).map(|n| (at, n))
    }

    fn stat(&self, path: &str) -> Option<PathStat> {
        let (at, node) = self.node(path)?;
        Some(match node {
            Node::File(data) => PathStat {
                size: data.len() as u64,
                mode: 0o644,
                link_target: String::new(),
            },
            Node::Dir => PathStat {
                size: 4096,
                mode: PathStat::DIR | 0o755,
                link_target: String::new(),
            },
            Node::Link(_) => PathStat {
                size: 0,
                mode: PathStat::SYMLINK | 0o777,
                link_target: self.resolve(&at).unwrap_or_default(),
            },
        })
    }

    /// The tar the archive API answers: the path's entry named by its last component,
    /// and, for a directory, everything under it.
    fn get(&self, path: &str) -> Option<Vec<u8>> {
        let (at, node) = self.node(path)?;
        let last = at.rsplit('/').next().unwrap_or("").to_string();
        let mut b = tar::Builder::new(Vec::new());
        let mut add = |name: &str, node: &Node| {
            let mut h = tar::Header::new_gnu();
            match node {
                Node::File(data) => {
                    h.set_entry_type(tar::EntryType::Regular);
                    h.set_size(data.len() as u64);
                    h.set_mode(0o644);
                    b.append_data(&mut h, name, &data[..]).expect("in memory");
                }
                Node::Dir => {
                    h.set_entry_type(tar::EntryType::Directory);
                    h.set_size(0);
                    h.set_mode(0o755);
                    b.append_data(&mut h, name, &[][..]).expect("in memory");
                }
                Node::Link(target) => {
                    h.set_entry_type(tar::EntryType::Symlink);
                    h.set_size(0);
                    h.set_mode(0o777);
                    b.append_link(&mut h, name, target).expect("in memory");
                }
            }
        };
        add(&last, node);
        if matches!(node, Node::Dir) {
            let prefix = format!("{at}/");
            for (p, n) in self.nodes.range(prefix.clone()..) {
                let Some(rel) = p.strip_prefix(&prefix) else { break };
                add(&format!("{last}/{rel}"), n);
            }
        }
        b.into_inner().ok()
    }
}

/// Reads a [`Tree`], recording each request on the engine's calls.
struct TreeReader<'a> {
    engine: &'a Fake,
    image: String,
    tree: Tree,
}

impl PathReader for TreeReader<'_> {
    fn ask(
        &self,
        stats: &[String],
        gets: &[(String, u64)],
    ) -> Result<(Vec<Option<PathStat>>, Vec<Fetched>), DockerError> {
        for p in stats {
            self.engine.call(format!("stat {p}"));
        }
        for (p, _) in gets {
            self.engine.call(format!("get {p}"));
        }
        let stated = stats.iter().map(|p| self.tree.stat(p)).collect();
        let fetched = gets
            .iter()
            .map(|(p, limit)| match self.tree.get(p) {
                None => Fetched::Missing,
                Some(tar) if tar.len() as u64 > *limit => Fetched::TooLarge,
                Some(tar) => Fetched::Tar(tar),
            })
            .collect();
        Ok((stated, fetched))
    }

    fn close(self: Box<Self>) -> Result<(), DockerError> {
        self.engine.call(format!("close {}", self.image));
        Ok(())
    }
}

impl Fake {
    fn call(&self, c: String) {
        self.calls.borrow_mut().push(c);
    }
}

impl Engine for Fake {
    fn build(&self, _context: Vec<u8>, progress: &mut dyn FnMut(Progress)) -> Result<String, DockerError> {
        self.call("build".into());
        for e in &self.build_events {
            progress(e.clone());
        }
        let r = self
            .build_result
            .clone()
            .unwrap_or_else(|| Ok("sha256:built".into()));
        if let Ok(id) = &r {
            self.images.borrow_mut().insert(
                id.clone(),
                ImageDetails {
                    id: id.clone(),
                    size: Some(1234),
                    ..ImageDetails::default()
                },
            );
        }
        r
    }

    fn tag(&self, image: &str, name: &Reference) -> Result<(), DockerError> {
        self.call(format!("tag {image} {name}"));
        let details = self
            .images
            .borrow()
            .get(image)
            .cloned()
            .ok_or_else(|| DockerError::NoSuchImage(image.into()))?;
        self.images.borrow_mut().insert(name.to_string(), details);
        Ok(())
    }

    fn inspect(&self, name: &str) -> Result<Option<ImageDetails>, DockerError> {
        self.call(format!("inspect {name}"));
        Ok(self.images.borrow().get(name).cloned())
    }

    fn remove(&self, name: &str, _force: bool) -> Result<bool, DockerError> {
        self.call(format!("remove {name}"));
        if let Some(e) = &self.remove_error {
            return Err(e.clone());
        }
        Ok(self.images.borrow_mut().remove(name).is_some())
    }

    fn registry_digest(
        &self,
        image: &Reference,
        _creds: Option<&Credentials>,
        _deadline: &Deadline,
    ) -> Result<String, DockerError> {
        self.call(format!("registry_digest {image}"));
        self.announced
            .clone()
            .unwrap_or_else(|| Err(DockerError::NoSuchImage(image.to_string())))
    }

    fn pull(
        &self,
        image: &Reference,
        _creds: Option<&Credentials>,
        _deadline: &Deadline,
        progress: &mut dyn FnMut(Progress) -> Result<(), DockerError>,
    ) -> Result<Option<String>, DockerError> {
        self.call(format!("pull {image}"));
        let events = self.pull_events.clone().unwrap_or_else(|| {
            ["Pulling fs layer", "Downloading", "Pull complete"]
                .iter()
                .enumerate()
                .map(|(i, status)| Progress::Layer {
                    id: "aaaa".into(),
                    status: status.to_string(),
                    current: Some(i as u64 * 50),
                    total: Some(100),
                })
                .collect()
        });
        for e in events {
            progress(e)?;
        }
        if let Some(e) = &self.pull_error {
            return Err(e.clone());
        }
        let held = self.held_digest.clone().or_else(|| self.pulled_digest.clone());
        self.images.borrow_mut().insert(
            image.to_string(),
            ImageDetails {
                id: "sha256:pulled".into(),
                repo_tags: vec![image.to_string()],
                repo_digests: held.iter().map(|d| format!("{}@{d}", image.name())).collect(),
                size: Some(99),
                layers: 1,
                ..ImageDetails::default()
            },
        );
        Ok(self.pulled_digest.clone())
    }

    fn push(
        &self,
        image: &Reference,
        _creds: Option<&Credentials>,
        _progress: &mut dyn FnMut(Progress),
    ) -> Result<Option<String>, DockerError> {
        self.call(format!("push {image}"));
        Ok(self.pulled_digest.clone())
    }

    fn import(&self, _rootfs: Vec<u8>, name: &Reference, _changes: &[String]) -> Result<String, DockerError> {
        self.call(format!("import {name}"));
        Ok("sha256:imported".into())
    }

    fn remove_one(&self, id: &str) -> Result<bool, DockerError> {
        self.call(format!("remove_one {id}"));
        if let Some(e) = &self.remove_error {
            return Err(e.clone());
        }
        Ok(self.images.borrow_mut().remove(id).is_some())
    }

    fn parent(&self, image: &str) -> Result<Option<String>, DockerError> {
        self.call(format!("parent {image}"));
        Ok(self.parents.get(image).cloned())
    }

    fn remove_container(&self, id: &str) -> Result<bool, DockerError> {
        self.call(format!("remove_container {id}"));
        match &self.remove_error {
            Some(e) => Err(e.clone()),
            None => Ok(true),
        }
    }

    fn load(&self, _archive: Vec<u8>) -> Result<(), DockerError> {
        self.call("load".into());
        Ok(())
    }

    fn export(&self, image: &str) -> Result<Box<dyn std::io::Read + Send>, DockerError> {
        self.call(format!("export {image}"));
        Err(DockerError::NoSuchImage(image.to_string()))
    }

    fn read_file(&self, image: &str, path: &str, _limit: u64) -> Result<Vec<u8>, DockerError> {
        self.call(format!("read_file {image} {path}"));
        Err(DockerError::NoSuchImage(image.into()))
    }

    fn image_config(&self, name: &str) -> Result<Option<ImageConfigDoc>, DockerError> {
        self.call(format!("image_config {name}"));
        Ok(self.trees.get(name).map(|t| ImageConfigDoc {
            config: t.config.clone(),
            names: t.names.clone(),
        }))
    }

    fn open_paths(&self, image: &str) -> Result<Box<dyn PathReader + '_>, DockerError> {
        self.call(format!("open_paths {image}"));
        let tree = self
            .trees
            .get(image)
            .cloned()
            .ok_or_else(|| DockerError::NoSuchImage(image.to_string()))?;
        Ok(Box::new(TreeReader {
            engine: self,
            image: image.to_string(),
            tree,
        }))
    }
}
