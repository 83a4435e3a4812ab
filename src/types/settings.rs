//! The run's settings as a saved report carries them back. `config` in
//! report.json holds every flag as JSON, for people and scripts; where
//! llmsweep itself reads a saved report's settings again (a merge of
//! shards, a checkpoint, a rerun, the phases planner, a price), it reads
//! this typed record, built in one place.

use serde_json::Value;

use super::report::Report;

/// The settings a saved report is read back for. A value of the wrong
/// type reads as absent: reports are user files.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SavedSettings {
    /// `--shard I/N`, as typed (the engine parses it).
    pub shard: Option<String>,
    /// `--rate`: its numbers, None unless every entry is one.
    pub rate: Option<Vec<f64>>,
    /// `--max-seconds` when it was a number.
    pub max_seconds: Option<f64>,
    /// `--gpu-hourly-cost` and `--gpus`.
    pub gpu_hourly_cost: Option<f64>,
    pub gpus: Option<u32>,
    /// The run had an API key (its value is never saved).
    pub had_api_key: bool,
    /// `--profile` (the strategy) and the profile file's name.
    pub profile: Option<String>,
    pub profile_name: Option<String>,
    /// What the data was, in words.
    pub data_source: Option<String>,
    /// `--repeat N`.
    pub repeat: Option<u32>,
    /// `--percentiles`: the numbers among them.
    pub percentiles: Vec<f64>,
    /// `--batch` (pooling APIs).
    pub batch: Option<u64>,
    /// What each request carried beside its text (`--data …,images=N`,
    /// `tools=N`): images, the bytes of their data URLs, tool definitions.
    pub images: Option<u32>,
    pub image_bytes: Option<f64>,
    /// Audio and video clips (`audio=N`, `video=N`) and their bytes.
    pub audio: Option<u32>,
    pub audio_bytes: Option<f64>,
    pub video: Option<u32>,
    pub video_bytes: Option<f64>,
    pub tools: Option<u32>,
}

impl SavedSettings {
    pub fn of(config: &Value) -> Self {
        let number = |k: &str| config.get(k).and_then(Value::as_f64);
        let text = |k: &str| config.get(k).and_then(Value::as_str).map(str::to_string);
        let part = |k: &str| config.get("request_parts").and_then(|p| p.get(k));
        let count = |k: &str| {
            part(k)
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
        };
        SavedSettings {
            shard: text("shard"),
            rate: config
                .get("rate")
                .and_then(Value::as_array)
                .and_then(|a| a.iter().map(Value::as_f64).collect()),
            max_seconds: number("max_seconds"),
            gpu_hourly_cost: number("gpu_hourly_cost"),
            gpus: config
                .get("gpus")
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok()),
            had_api_key: config.get("api_key").is_some_and(|v| !v.is_null()),
            profile: text("profile"),
            profile_name: text("profile_name"),
            data_source: text("data_source"),
            repeat: config
                .get("repeat")
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok()),
            percentiles: config
                .get("percentiles")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default(),
            batch: config.get("batch").and_then(Value::as_u64),
            images: count("images"),
            image_bytes: part("image_bytes").and_then(Value::as_f64),
            audio: count("audio"),
            audio_bytes: part("audio_bytes").and_then(Value::as_f64),
            video: count("video"),
            video_bytes: part("video_bytes").and_then(Value::as_f64),
            tools: count("tools"),
        }
    }
}

impl Report {
    /// The report's settings, read back typed.
    pub fn settings(&self) -> SavedSettings {
        SavedSettings::of(&self.config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_of_the_wrong_type_read_as_absent() {
        let s = SavedSettings::of(&serde_json::json!({
            "shard": "1/4", "rate": [5.0, 8], "max_seconds": "auto",
            "gpu_hourly_cost": 2.5, "gpus": 8, "api_key": "***",
            "percentiles": [99.9, "x"], "repeat": 3, "batch": 16, "profile_name": "sweep"
        }));
        assert_eq!(s.percentiles, vec![99.9]);
        assert_eq!((s.repeat, s.batch), (Some(3), Some(16)));
        assert_eq!(s.profile_name.as_deref(), Some("sweep"));
        assert_eq!(s.shard.as_deref(), Some("1/4"));
        assert_eq!(s.rate, Some(vec![5.0, 8.0]));
        assert_eq!(s.max_seconds, None);
        assert_eq!((s.gpu_hourly_cost, s.gpus), (Some(2.5), Some(8)));
        assert!(s.had_api_key);
        let bad = SavedSettings::of(&serde_json::json!({
            "shard": 3, "rate": [5.0, "x"], "gpus": -1, "api_key": null
        }));
        assert_eq!(bad, SavedSettings::default());
        assert_eq!(SavedSettings::of(&Value::Null), SavedSettings::default());
    }
}
