//! Which file of the merged configuration set a value, for the errors that name it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The value at a dotted JSON path of the merged configuration.
pub(super) fn value_at<'v>(root: &'v Value, json_path: &str) -> Option<&'v Value> {
    json_path.split('.').try_fold(root, |value, key| value.get(key))
}

/// Finds which file to name for a value of the merged configuration.
pub(super) struct Blame<'a> {
    pub(super) origins: &'a BTreeMap<String, PathBuf>,
    /// The files read, lowest precedence first.
    pub(super) files: &'a [PathBuf],
}

impl Blame<'_> {
    fn rank(&self, file: &Path) -> usize {
        self.files.iter().rposition(|f| f == file).unwrap_or(0)
    }

    /// The file that set `json_path`; for an object, the highest-precedence file that set anything in it.
    fn find(&self, json_path: &str) -> Option<&PathBuf> {
        if let Some(file) = self.origins.get(json_path) {
            return Some(file);
        }
        let below = if json_path.is_empty() { String::new() } else { format!("{json_path}.") };
        self.origins
            .range(below.clone()..)
            .take_while(|(origin, _)| origin.starts_with(&below))
            .map(|(_, file)| file)
            .max_by_key(|file| self.rank(file))
    }

    /// Like [`Blame::find`], falling back to the highest-precedence file (a default can only be wrong in
    /// combination with something a file set).
    pub(super) fn file_of(&self, json_path: &str) -> PathBuf {
        self.find(json_path)
            .or_else(|| self.files.last())
            .cloned()
            .unwrap_or_else(|| PathBuf::from("(defaults)"))
    }

    /// Of values that conflict, the one set by the highest-precedence file (the first on a tie).
    pub(super) fn culprit<'p>(&self, json_paths: &[&'p str]) -> &'p str {
        let mut best: Option<(&'p str, usize)> = None;
        for &json_path in json_paths {
            if let Some(file) = self.find(json_path) {
                let rank = self.rank(file);
                if best.is_none_or(|(_, best_rank)| rank > best_rank) {
                    best = Some((json_path, rank));
                }
            }
        }
        best.map_or(json_paths.first().copied().unwrap_or_default(), |(json_path, _)| json_path)
    }
}
