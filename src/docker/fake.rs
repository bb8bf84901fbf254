//! An [`Engine`] that answers from memory, for unit tests of what runs on an Engine.

use std::cell::RefCell;
use std::collections::BTreeMap;

use super::{Credentials, DockerError, Engine, ImageDetails, Progress, Reference};
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
    pub calls: RefCell<Vec<String>>,
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
}
