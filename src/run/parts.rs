//! What each request of the run carries beside its text, as the saved
//! settings keep it for every report derived from the run's.

use serde_json::json;

/// What each request carried beside its text, for every report derived
/// from this run's (report::assemble: a run, its checkpoint, a merge): the
/// images a request (of a file's rows or conversations: on average, the
/// count rounded), their bytes, its audio and video clips and their bytes,
/// the most tools one defines. None when requests carried none of them.
pub(super) fn request_parts(
    images: Option<&crate::data::images::Attach>,
    row_images: Option<&crate::data::RowImages>,
    scripts: &[crate::data::scripts::Script],
    tools: Option<&crate::data::tools::ToolSpec>,
) -> Option<serde_json::Value> {
    let script_images =
        (!scripts.is_empty() && scripts.iter().any(|s| !s.images.is_empty())).then(|| {
            let n = scripts.len() as f64;
            let count: usize = scripts.iter().map(|s| s.images.len()).sum();
            let bytes: usize = scripts
                .iter()
                .flat_map(|s| s.images.iter().map(|u| u.len()))
                .sum();
            (count as f64 / n, bytes as f64 / n)
        });
    let (image_count, image_bytes) = match (
        images,
        row_images
            .map(|r| (r.per_request, r.bytes_per_request))
            .or(script_images),
    ) {
        (Some(im), _) => (Some(im.count), Some(im.bytes_per_request)),
        (None, Some((count, bytes))) => (Some(count.round().max(1.0) as u32), Some(bytes)),
        (None, None) => (None, None),
    };
    let tool_count = tools.map(|t| t.tools).or_else(|| {
        scripts
            .iter()
            .filter_map(|s| s.tools.as_ref())
            .map(|t| t.len() as u32)
            .max()
    });
    let clip = |kind| {
        images
            .into_iter()
            .flat_map(|im| &im.clips)
            .find(|c| c.kind == kind)
    };
    let (audio, video) = (
        clip(crate::client::MediaKind::Audio),
        clip(crate::client::MediaKind::Video),
    );
    // Clips without images: no image figures.
    let image_count = image_count.filter(|n| *n > 0);
    let image_bytes = image_bytes.filter(|_| image_count.is_some());
    let any = image_count.is_some() || audio.is_some() || video.is_some();
    (any || tool_count.is_some()).then(|| {
        json!({
            "images": image_count,
            "image_bytes": image_bytes,
            "audio": audio.map(|c| c.count),
            "audio_bytes": audio.map(|c| c.bytes_per_request),
            "video": video.map(|c| c.count),
            "video_bytes": video.map(|c| c.bytes_per_request),
            "tools": tool_count,
        })
    })
}
