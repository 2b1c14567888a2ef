//! `epochal gc`: what runs of dead harnesses left in Docker, and images that
//! are no longer current.

use std::collections::{BTreeMap, HashMap};

use testcontainers::bollard::errors::Error as DockerError;

use super::api::{self, docker_error};
use super::image;
use crate::runtime::{ClusterConfig, RuntimeError};
use crate::system::find_executable;

/// What `epochal gc` removed.
#[derive(Debug, Default)]
pub struct GcReport {
    pub containers: usize,
    pub networks: usize,
    /// The tags (or ids) of the images removed.
    pub images: Vec<String>,
}

/// Removes the containers and networks of epochal runs whose harness process
/// is gone (with `all`, of every epochal run, even one still going), then every
/// epochal image that is not the current one for its name: the hash of what it
/// would hold now, from `bin_dir` and `etcd`. An image whose binary is missing
/// here is kept (nothing to compare), and so is one a container still uses.
pub async fn gc(
    bin_dir: &std::path::Path,
    etcd: &std::path::Path,
    all: bool,
) -> Result<GcReport, RuntimeError> {
    use testcontainers::bollard::query_parameters::{ListImagesOptions, RemoveImageOptions};

    let docker = api::connect()?;
    let removed = if all {
        api::remove_labelled(&docker, api::LABEL_PROJECT, "epochal", false).await?
    } else {
        api::remove_orphans(&docker).await?
    };
    let config = ClusterConfig::new(1, bin_dir, ".");
    let etcd = find_executable(etcd).unwrap_or_else(|| etcd.to_owned());
    let mut current = BTreeMap::new();
    for spec in image::specs(&config, config.broker_bin(), Some(etcd)).all() {
        if spec.binary.is_file() {
            current.insert(spec.repository(), spec.context()?.tag);
        }
    }
    // The PostgreSQL service's image, from this machine's server.
    if let Ok(bin) = crate::runtime::postgres::find_binaries() {
        let spec = image::postgres(&bin);
        current.insert(spec.repository(), spec.context()?.tag);
    }
    let images = docker
        .list_images(Some(ListImagesOptions {
            filters: Some(HashMap::from([(
                "label".to_owned(),
                vec![format!("{}=epochal", api::LABEL_PROJECT)],
            )])),
            ..Default::default()
        }))
        .await
        .map_err(|e| docker_error("listing epochal images", e))?;
    let mut report = GcReport {
        containers: removed.containers,
        networks: removed.networks,
        images: Vec::new(),
    };
    let mut failures = Vec::new();
    for image in images {
        let repository = image
            .labels
            .get(api::LABEL_IMAGE)
            .map(|n| format!("epochal-{n}"));
        let Some(want) = repository.and_then(|r| current.get(&r)) else {
            continue;
        };
        if image.repo_tags.iter().any(|t| t == want) {
            continue;
        }
        // By tag and without force: an image a container still uses (a run
        // of another checkout, say) is refused by Docker (409) and kept.
        // A dangling image (its tag taken by a newer build of the same
        // contents, e.g. two harnesses building at once) lists `<none>:<none>`.
        let tags: Vec<String> = image
            .repo_tags
            .iter()
            .filter(|t| t.as_str() != "<none>:<none>")
            .cloned()
            .collect();
        let names = if tags.is_empty() {
            vec![image.id.clone()]
        } else {
            tags
        };
        for name in names {
            match docker
                .remove_image(&name, None::<RemoveImageOptions>, None)
                .await
            {
                Ok(_) => report.images.push(name),
                Err(DockerError::DockerResponseServerError {
                    status_code: 409, ..
                }) => {}
                Err(e) => failures.push(format!("image {name}: {e}")),
            }
        }
    }
    if failures.is_empty() {
        Ok(report)
    } else {
        Err(RuntimeError::Cleanup(failures))
    }
}
