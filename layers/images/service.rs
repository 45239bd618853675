use super::check::check_images;
use crate::plugin::ImageLimits;
use crate::plugin::{
    AGENT_RUN, Check, Gate, GateLayer, McpRequest, McpResponse, ParsedCall, ToolCall, invalid_args,
};

/// Checks the images of `agent_run` calls and records each one's [`CheckedImage`] on the typed
/// arguments it hands downstream; see the [module docs](super).
///
/// [`CheckedImage`]: crate::plugin::CheckedImage
pub type Images<S> = Gate<S, ImageRules>;

/// Applies [`Images`] to a service: the image rules of `docs/contract.md` §2.5 under the given
/// limits (`mcp.images` in `agent.yaml`).
/// `ImagesLayer::new(ImageRules(limits))`.
pub type ImagesLayer = GateLayer<ImageRules>;

/// The [`Check`] of the images layer: the image rules under these limits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImageRules(pub ImageLimits);

impl From<ImageLimits> for ImageRules {
    fn from(limits: ImageLimits) -> Self {
        ImageRules(limits)
    }
}

impl Check for ImageRules {
    fn check(&self, req: &mut McpRequest) -> Result<(), McpResponse> {
        // Only `agent_run` carries images; other calls are not this layer's to parse.
        if req.call.is_none() && req.tool_name() != Some(AGENT_RUN) {
            return Ok(());
        }
        let problems = match req.parse_tool_call() {
            ParsedCall::Parsed(ToolCall::Run(args)) => {
                check_images(&mut args.images, &self.0).err()
            }
            ParsedCall::Invalid(answer) => return Err(req.result(answer)),
            ParsedCall::Parsed(ToolCall::Status(_)) | ParsedCall::NotOurs => None,
        };
        match problems {
            Some(problems) => Err(req.result(invalid_args(AGENT_RUN, &problems))),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use tower::{Layer, ServiceBuilder, ServiceExt, service_fn};

    use std::convert::Infallible;

    use super::*;
    use crate::plugin::{
        McpResult, Payload, ProtocolVersion, RequestContext, RequestId, Transport,
    };

    const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

    fn request(params: Value) -> McpRequest {
        McpRequest::new(
            Some(RequestId::Number(3)),
            "tools/call",
            params.as_object().cloned().unwrap_or_default(),
            RequestContext::new(ProtocolVersion::V2026_07_28, Transport::InProcess),
        )
    }

    /// Runs `req` through the layer around a handler that reports what it was handed.
    async fn run(req: McpRequest) -> (String, bool) {
        let svc = ServiceBuilder::new()
            .layer(ImagesLayer::new(ImageRules(ImageLimits::default())))
            .service(service_fn(|req: McpRequest| async move {
                let seen = match &req.call {
                    Some(ToolCall::Run(args)) => format!(
                        "images: {:?}",
                        args.images
                            .iter()
                            .map(|i| (i.mime_type.mime(), i.checked.map(|c| c.decoded_len)))
                            .collect::<Vec<_>>()
                    ),
                    _ => "no typed agent_run".to_owned(),
                };
                Ok::<_, Infallible>(req.result(McpResult::tool_text(seen, false)))
            }));
        let resp = match svc.oneshot(req).await {
            Ok(resp) => resp,
            Err(never) => match never {},
        };
        assert_eq!(resp.id, Some(RequestId::Number(3)));
        match resp.payload {
            Payload::Result(r) => (r.first_text().unwrap_or("").to_owned(), r.is_tool_error()),
            other => panic!("expected a result, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn passing_images_reach_the_handler_checked_on_the_typed_arguments() {
        let got = run(request(
            json!({"name": "agent_run", "arguments": {"request": "x",
            "images": [{"mime_type": "image/png", "data_base64": PNG_1X1}]}}),
        ))
        .await;
        assert_eq!(
            got,
            ("images: [(\"image/png\", Some(70))]".to_owned(), false)
        );
    }

    #[tokio::test]
    async fn agent_run_without_images_gets_an_empty_list() {
        for args in [
            json!({"request": "x"}),
            json!({"request": "x", "images": null}),
        ] {
            let got = run(request(json!({"name": "agent_run", "arguments": args}))).await;
            assert_eq!(got, ("images: []".to_owned(), false));
        }
    }

    #[tokio::test]
    async fn a_bad_image_is_a_tool_error_and_the_handler_is_not_called() {
        let got = run(request(
            json!({"name": "agent_run", "arguments": {"request": "x",
            "images": [{"mime_type": "image/gif", "data_base64": "R0lGODlh"}]}}),
        ))
        .await;
        assert_eq!(
            got,
            (
                "Invalid arguments for tool \"agent_run\":\n\
                 images[0].mime_type: \"image/gif\" is not supported; use image/png, image/jpeg or image/webp"
                    .to_owned(),
                true
            )
        );
    }

    #[tokio::test]
    async fn other_calls_pass_through_untouched() {
        let bad = json!([null]);
        for params in [
            json!({"name": "agent_status", "arguments": {"images": bad}}),
            json!({"name": "other", "arguments": {"images": bad}}),
            json!({"name": "agent_run", "arguments": "images"}),
        ] {
            let got = run(request(params.clone())).await;
            assert_eq!(got, ("no typed agent_run".to_owned(), false), "{params}");
        }
        let mut note = request(json!({"name": "agent_run", "arguments": {"images": bad}}));
        note.id = None;
        let svc = ImagesLayer::new(ImageRules(ImageLimits::default())).layer(service_fn(
            |req: McpRequest| async move {
                Ok::<_, Infallible>(req.respond(crate::plugin::Payload::Accepted))
            },
        ));
        let resp = match svc.oneshot(note).await {
            Ok(resp) => resp,
            Err(never) => match never {},
        };
        assert_eq!(resp.payload, Payload::Accepted);
    }
}
