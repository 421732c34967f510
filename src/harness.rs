//! Harness manifests and builds.
