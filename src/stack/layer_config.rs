//! Each layer's own configuration type, converted from its `agent.yaml` section: the layers
//! know nothing of the configuration file (they use only the plugin surface), so the
//! composition root translates.

use crate::config;
use crate::layers::images;

impl From<config::ImageLimits> for images::ImageLimits {
    fn from(section: config::ImageLimits) -> Self {
        let config::ImageLimits {
            max_count,
            max_bytes,
            max_total_bytes,
        } = section;
        Self {
            max_count,
            max_bytes,
            max_total_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_agree() {
        assert_eq!(
            images::ImageLimits::from(config::ImageLimits::default()),
            images::ImageLimits::default()
        );
    }
}
