//! What the loop adapts to the model, decided once per task from `/api/show`: the steering
//! policy (`agent.steering`), the context window sent as `num_ctx`, and `think`.
//!
//! ```
//! use agent_mcp::agent::{AgentSettings, ModelProfile};
//! use agent_mcp::ollama::ShowResponse;
//! let show: ShowResponse = serde_json::from_value(serde_json::json!({
//!     "capabilities": ["completion", "tools"],
//!     "details": {"parameter_size": "1.5B"},
//!     "model_info": {"qwen2.context_length": 32768}
//! })).unwrap();
//! let settings = AgentSettings::from_config(&Default::default());
//! let profile = ModelProfile::from_show(&settings, &show);
//! assert_eq!(profile.num_ctx, 32768);
//! assert_eq!(profile.policy.as_str(), "small");
//! ```

use std::time::Duration;

use crate::agent::AgentSettings;
use crate::agent::steering::Policy;
use crate::config::{Config, SteeringMode, ThinkSetting};
use crate::ollama::{OllamaClient, ShowResponse, Think};

/// How long `check-config` waits for `/api/show`.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// What `config`'s model gets, asked from its Ollama now: the line of
/// [`ModelProfile::describe`], or why it cannot be told (Ollama not reachable, model missing).
/// For `agent-mcp check-config`.
pub async fn probe(config: &Config) -> String {
    let model = &config.ollama.model;
    let client = match OllamaClient::new(&config.ollama.url, PROBE_TIMEOUT, PROBE_TIMEOUT) {
        Ok(client) => client.with_api_key(config.ollama.api_key.clone()),
        Err(e) => return format!("model {model}: cannot ask Ollama ({e})"),
    };
    let key = match (&config.ollama.api_key, client.sends_api_key()) {
        (Some(_), true) => "; API key from OLLAMA_API_KEY (not shown)",
        (Some(_), false) => "; OLLAMA_API_KEY is set but not sent (the URL is not https)",
        (None, _) => "",
    };
    match client.show(model).await {
        Ok(show) => {
            let settings = AgentSettings::from_config(config);
            format!(
                "{}{key}",
                ModelProfile::from_show(&settings, &show).describe(model)
            )
        }
        Err(e) => format!(
            "model {model}: cannot ask Ollama now ({e}){key}; steering, num_ctx and think are \
             decided from /api/show when a task starts"
        ),
    }
}

/// How the loop talks to this model.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelProfile {
    pub policy: Policy,
    /// A change is asked for with the workspace's files in the prompt and answered with whole
    /// files (`agent.steering: files`, or `auto` below 7B), where they fit (the `direct` module).
    pub files: bool,
    /// Why that policy: `small (auto: 1.5B parameters, below 7B)`.
    pub policy_reason: String,
    /// Sent as `options.num_ctx`: the model's context length, at most `ollama.num_ctx`.
    pub num_ctx: u32,
    /// The model's own context length, when `/api/show` tells it.
    pub context_length: Option<u64>,
    /// Sent as `think`; `None` for a model without the `thinking` capability.
    pub think: Option<Think>,
    /// `agent.think` asks for thinking the model cannot do.
    pub think_ignored: bool,
}

impl ModelProfile {
    pub fn from_show(settings: &AgentSettings, show: &ShowResponse) -> ModelProfile {
        let (policy, policy_reason) = Policy::for_model(settings.agent.steering, show);
        let context_length = show.context_length();
        let num_ctx = match context_length {
            Some(length) => u32::try_from(length)
                .unwrap_or(u32::MAX)
                .min(settings.ollama.num_ctx),
            None => settings.ollama.num_ctx,
        };
        let thinks = show.has("thinking");
        let think = thinks.then(|| settings.agent.think.to_wire());
        let files = policy == Policy::Small
            && matches!(
                settings.agent.steering,
                SteeringMode::Files | SteeringMode::Auto
            );
        ModelProfile {
            policy,
            files,
            policy_reason,
            num_ctx,
            context_length,
            think,
            think_ignored: !thinks && settings.agent.think != ThinkSetting::Off,
        }
    }

    /// One line for the start-up log and `check-config`.
    pub fn describe(&self, model: &str) -> String {
        let context = match self.context_length {
            Some(length) => format!(
                "num_ctx {} (the model's {length}, at most ollama.num_ctx)",
                self.num_ctx
            ),
            None => format!(
                "num_ctx {} (ollama.num_ctx; the model's length is not known)",
                self.num_ctx
            ),
        };
        let think = match (&self.think, self.think_ignored) {
            (Some(think), _) => format!("think {think}"),
            (None, true) => "think off (agent.think is set, but the model lacks `thinking`)".into(),
            (None, false) => "think not sent (the model lacks `thinking`)".into(),
        };
        format!(
            "model {model}: steering {}, {context}, {think}",
            self.policy_reason
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn show(value: serde_json::Value) -> ShowResponse {
        serde_json::from_value(value).unwrap_or_default()
    }

    #[test]
    fn num_ctx_follows_the_model_capped_by_the_configuration() {
        let mut settings = AgentSettings::from_config(&Default::default());
        settings.ollama.num_ctx = 32768;
        let big = show(json!({"model_info": {"llama.context_length": 131072}}));
        assert_eq!(ModelProfile::from_show(&settings, &big).num_ctx, 32768);
        let small = show(json!({"model_info": {"gemma3.context_length": 8192}}));
        assert_eq!(ModelProfile::from_show(&settings, &small).num_ctx, 8192);
        let unknown = show(json!({}));
        assert_eq!(ModelProfile::from_show(&settings, &unknown).num_ctx, 32768);
    }

    #[test]
    fn the_files_policy_is_autos_below_7b_and_files_own_never_smalls() {
        let small = show(json!({"details": {"parameter_size": "1.5B"}}));
        let big = show(json!({"details": {"parameter_size": "8B"}}));
        let mut settings = AgentSettings::from_config(&Default::default());
        assert!(ModelProfile::from_show(&settings, &small).files);
        assert!(!ModelProfile::from_show(&settings, &big).files);
        settings.agent.steering = SteeringMode::Small;
        assert!(!ModelProfile::from_show(&settings, &small).files);
        settings.agent.steering = SteeringMode::Files;
        assert!(ModelProfile::from_show(&settings, &big).files);
        settings.agent.steering = SteeringMode::Off;
        assert!(!ModelProfile::from_show(&settings, &small).files);
    }

    #[test]
    fn think_is_sent_only_to_a_model_that_thinks() {
        let mut settings = AgentSettings::from_config(&Default::default());
        settings.agent.think = ThinkSetting::High;
        let thinker = show(json!({"capabilities": ["completion", "thinking"]}));
        let profile = ModelProfile::from_show(&settings, &thinker);
        assert_eq!(profile.think, Some(Think::Level("high".into())));
        let plain = show(json!({"capabilities": ["completion"]}));
        let profile = ModelProfile::from_show(&settings, &plain);
        assert_eq!(profile.think, None);
        assert!(profile.think_ignored);
        assert!(
            profile
                .describe("m")
                .ends_with("think off (agent.think is set, but the model lacks `thinking`)")
        );
    }
}
