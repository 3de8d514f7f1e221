//! Profile name validation: a name is a single folder name, so it can never lead outside the profile folders.

use crate::error::{Error, Result};

/// The longest profile name allowed, in bytes (all allowed characters are ASCII).
pub const MAX_PROFILE_NAME_LEN: usize = 64;

/// Checks that `name` can name a profile folder: 1 to [`MAX_PROFILE_NAME_LEN`] ASCII letters, digits, `-`,
/// `_` or `.`, and not `.` or `..`. So a name has no path separator, is never absolute and never climbs
/// out of the profile folders.
///
/// # Errors
/// [`Error::InvalidProfileName`], saying what is wrong and what is allowed.
pub fn validate_profile_name(name: &str) -> Result<()> {
    let invalid = |reason: String| Err(Error::InvalidProfileName { name: name.to_owned(), reason });
    if name.is_empty() {
        return invalid("it is empty".to_owned());
    }
    if name == "." || name == ".." {
        return invalid("it names the current or parent folder".to_owned());
    }
    let bytes = name.as_bytes();
    let drive = bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':';
    if name.starts_with('/') || name.starts_with('\\') || drive {
        return invalid("it is an absolute path".to_owned());
    }
    if let Some(sep) = name.chars().find(|c| matches!(c, '/' | '\\')) {
        return invalid(format!("it contains the path separator {sep:?}"));
    }
    if let Some(bad) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))) {
        return invalid(format!("it contains the character {bad:?}"));
    }
    if name.len() > MAX_PROFILE_NAME_LEN {
        return invalid(format!("it is {} characters long", name.len()));
    }
    Ok(())
}
