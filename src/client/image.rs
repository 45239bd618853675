//! `--image FILE`: read the file, tell PNG, JPEG and WebP apart by their magic bytes, and
//! encode it as an `agent_run` image (`{mime_type, data_base64}`, `docs/contract.md` §2.5).
//!
//! The server checks the same magic bytes (and the size limits); checking here too means a
//! wrong file is named before anything is sent.

use std::path::{Path, PathBuf};

use base64::Engine;
use serde_json::{Value, json};

/// Why an image file cannot be sent.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("cannot read the image {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{} is not a PNG, JPEG or WebP image; allowed types: image/png, image/jpeg, image/webp",
        path.display()
    )]
    Unsupported { path: PathBuf },
}

/// The MIME type the first bytes of an image stand for.
pub fn sniff_mime(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if head.len() >= 12 && head.starts_with(b"RIFF") && head.get(8..12) == Some(b"WEBP") {
        Some("image/webp")
    } else {
        None
    }
}

/// Reads `path` into one element of `agent_run`'s `images`.
pub fn load_image(path: &Path) -> Result<Value, ImageError> {
    let bytes = std::fs::read(path).map_err(|source| ImageError::Read {
        path: path.to_owned(),
        source,
    })?;
    let mime_type = sniff_mime(&bytes).ok_or_else(|| ImageError::Unsupported {
        path: path.to_owned(),
    })?;
    Ok(json!({
        "mime_type": mime_type,
        "data_base64": base64::engine::general_purpose::STANDARD.encode(&bytes),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_bytes_name_the_type() {
        assert_eq!(sniff_mime(b"\x89PNG\r\n\x1a\n\0\0"), Some("image/png"));
        assert_eq!(sniff_mime(&[0xFF, 0xD8, 0xFF, 0xE0]), Some("image/jpeg"));
        assert_eq!(sniff_mime(b"RIFF\x10\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(sniff_mime(b"RIFF\x10\0\0\0WAVEfmt "), None);
        assert_eq!(sniff_mime(b"GIF89a"), None);
        assert_eq!(sniff_mime(b""), None);
    }

    #[test]
    fn files_are_read_and_encoded() {
        let dir = tempfile::tempdir().unwrap();
        let png = dir.path().join("a.png");
        std::fs::write(&png, b"\x89PNG\r\n\x1a\nrest").unwrap();
        assert_eq!(
            load_image(&png).unwrap(),
            json!({"mime_type": "image/png", "data_base64": "iVBORw0KGgpyZXN0"})
        );

        let gif = dir.path().join("a.gif");
        std::fs::write(&gif, b"GIF89a").unwrap();
        assert_eq!(
            load_image(&gif).unwrap_err().to_string(),
            format!(
                "{} is not a PNG, JPEG or WebP image; allowed types: image/png, image/jpeg, image/webp",
                gif.display()
            )
        );
        assert!(matches!(
            load_image(&dir.path().join("missing.png")),
            Err(ImageError::Read { .. })
        ));
    }
}
