//! The plan a task runs as: steps with ids, titles, instructions and dependencies.
//!
//! In the `planning` state the model answers one `/api/chat` call whose `format` is
//! [`plan_schema`]; [`Plan::parse`] checks that answer (valid JSON, at most `agent.max_steps`
//! steps, unique ids, known dependencies, no cycle) and orders the steps so each runs after the
//! steps it depends on. A rejected plan is not an error of the task: the runner falls back to
//! [`Plan::single`], one unplanned step.
//!
//! ```
//! use agent_mcp::agent::plan::Plan;
//!
//! let plan = Plan::parse(
//!     r#"{"steps":[
//!         {"id":"read","title":"Read the test","instructions":"…","dependencies":[]},
//!         {"id":"fix","title":"Fix it","instructions":"…","dependencies":["read"]}]}"#,
//!     8,
//! )
//! .unwrap();
//! assert_eq!(plan.order(), &[0, 1]);
//! assert_eq!(plan.critical_path(&[100, 50]), 150);
//! ```

use serde::Deserialize;
use serde_json::{Value, json};

/// Longest step title kept (titles are shown as `current_task`, one line).
const MAX_TITLE_CHARS: usize = 100;

/// One step of a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanStep {
    pub id: String,
    /// One line, at most 100 characters (longer titles are cut).
    pub title: String,
    /// What the step is to do; empty for an unplanned step (the request says it all).
    pub instructions: String,
    /// Indexes into [`Plan::steps`] of the steps whose results this step needs.
    pub dependencies: Vec<usize>,
}

/// A checked plan: no unknown dependency, no cycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    steps: Vec<PlanStep>,
    /// Indexes of `steps`, each after all of its dependencies.
    order: Vec<usize>,
    planned: bool,
}

/// Why a planning answer was not used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("not valid JSON for the plan schema")]
    NotJson,
    #[error("no steps")]
    Empty,
    #[error("{count} steps, more than agent.max_steps ({max})")]
    TooManySteps { count: usize, max: usize },
    #[error("a step has an empty id")]
    EmptyId,
    #[error("two steps share the id '{0}'")]
    DuplicateId(String),
    #[error("step '{step}' depends on unknown step '{dependency}'")]
    UnknownDependency { step: String, dependency: String },
    #[error("dependency cycle through step '{0}'")]
    Cycle(String),
}

#[derive(Deserialize)]
struct WirePlan {
    steps: Vec<WireStep>,
}

#[derive(Deserialize)]
struct WireStep {
    id: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    instructions: String,
    #[serde(default)]
    dependencies: Vec<String>,
}

/// The JSON schema sent as `format` of the planning call.
pub fn plan_schema(max_steps: usize) -> Value {
    json!({
        "type": "object",
        "properties": {
            "steps": {
                "type": "array",
                "minItems": 1,
                "maxItems": max_steps,
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "title": {"type": "string"},
                        "instructions": {"type": "string"},
                        "dependencies": {"type": "array", "items": {"type": "string"}}
                    },
                    "required": ["id", "title", "instructions", "dependencies"]
                }
            }
        },
        "required": ["steps"]
    })
}

impl Plan {
    /// One unplanned step: the task runs as a single chat (`critical_path_tokens` stays 0).
    pub fn single(title: impl Into<String>) -> Plan {
        Plan {
            steps: vec![PlanStep {
                id: "1".to_owned(),
                title: one_line(&title.into()),
                instructions: String::new(),
                dependencies: Vec::new(),
            }],
            order: vec![0],
            planned: false,
        }
    }

    /// Checks the model's planning answer.
    pub fn parse(text: &str, max_steps: usize) -> Result<Plan, PlanError> {
        let wire: WirePlan = serde_json::from_str(text.trim()).map_err(|_| PlanError::NotJson)?;
        if wire.steps.is_empty() {
            return Err(PlanError::Empty);
        }
        if wire.steps.len() > max_steps {
            return Err(PlanError::TooManySteps {
                count: wire.steps.len(),
                max: max_steps,
            });
        }
        let ids: Vec<String> = wire.steps.iter().map(|s| s.id.trim().to_owned()).collect();
        for (i, id) in ids.iter().enumerate() {
            if id.is_empty() {
                return Err(PlanError::EmptyId);
            }
            if ids[..i].contains(id) {
                return Err(PlanError::DuplicateId(id.clone()));
            }
        }
        let mut steps = Vec::with_capacity(wire.steps.len());
        for (wire_step, id) in wire.steps.into_iter().zip(&ids) {
            let mut dependencies = Vec::new();
            for dep in &wire_step.dependencies {
                let dep = dep.trim();
                let Some(index) = ids.iter().position(|x| x == dep) else {
                    return Err(PlanError::UnknownDependency {
                        step: id.clone(),
                        dependency: dep.to_owned(),
                    });
                };
                if !dependencies.contains(&index) {
                    dependencies.push(index);
                }
            }
            let title = match one_line(&wire_step.title) {
                t if t.is_empty() => one_line(id),
                t => t,
            };
            let instructions = match wire_step.instructions.trim() {
                "" => title.clone(),
                text => text.to_owned(),
            };
            steps.push(PlanStep {
                id: id.clone(),
                title,
                instructions,
                dependencies,
            });
        }
        let order = topological_order(&steps)?;
        Ok(Plan {
            steps,
            order,
            planned: true,
        })
    }

    pub fn steps(&self) -> &[PlanStep] {
        &self.steps
    }

    /// Whether the model planned this (false for [`Plan::single`]).
    pub fn is_planned(&self) -> bool {
        self.planned
    }

    /// Step indexes, each after all of its dependencies (plan order among equals).
    pub fn order(&self) -> &[usize] {
        &self.order
    }

    /// Steps no other step depends on, in execution order.
    pub fn leaves(&self) -> Vec<usize> {
        self.order
            .iter()
            .copied()
            .filter(|&i| !self.steps.iter().any(|s| s.dependencies.contains(&i)))
            .collect()
    }

    /// The largest sum of `tokens[i]` along one dependency chain; 0 for an unplanned task.
    pub fn critical_path(&self, tokens: &[u64]) -> u64 {
        if !self.planned {
            return 0;
        }
        let mut path = vec![0u64; self.steps.len()];
        for &i in &self.order {
            let before = self.steps[i]
                .dependencies
                .iter()
                .map(|&d| path[d])
                .max()
                .unwrap_or(0);
            path[i] = before.saturating_add(tokens.get(i).copied().unwrap_or(0));
        }
        path.into_iter().max().unwrap_or(0)
    }
}

/// Kahn's algorithm, taking the lowest ready index first so the plan's own order is kept.
fn topological_order(steps: &[PlanStep]) -> Result<Vec<usize>, PlanError> {
    let mut placed = vec![false; steps.len()];
    let mut order = Vec::with_capacity(steps.len());
    while order.len() < steps.len() {
        let next = (0..steps.len())
            .find(|&i| !placed[i] && steps[i].dependencies.iter().all(|&d| placed[d]));
        match next {
            Some(i) => {
                placed[i] = true;
                order.push(i);
            }
            None => {
                let stuck = (0..steps.len()).find(|&i| !placed[i]).unwrap_or(0);
                return Err(PlanError::Cycle(steps[stuck].id.clone()));
            }
        }
    }
    Ok(order)
}

/// Collapses whitespace (newlines included) and caps the length: titles end up on one status line.
pub(crate) fn one_line(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.chars().count() <= MAX_TITLE_CHARS {
        return joined;
    }
    let mut cut: String = joined.chars().take(MAX_TITLE_CHARS - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(id: &str, deps: &[&str]) -> Value {
        json!({"id": id, "title": format!("Step {id}"), "instructions": "do it", "dependencies": deps})
    }

    fn plan(steps: Vec<Value>) -> String {
        json!({ "steps": steps }).to_string()
    }

    #[test]
    fn valid_plan_is_ordered_by_dependencies() {
        let p = Plan::parse(
            &plan(vec![step("b", &["a"]), step("a", &[]), step("c", &[])]),
            8,
        )
        .unwrap();
        assert_eq!(p.order(), &[1, 0, 2]);
        assert_eq!(p.steps()[0].dependencies, vec![1]);
        assert_eq!(p.leaves(), vec![0, 2]);
        assert!(p.is_planned());
    }

    #[test]
    fn critical_path_is_the_heaviest_chain() {
        let p = Plan::parse(
            &plan(vec![step("a", &[]), step("b", &["a"]), step("c", &[])]),
            8,
        )
        .unwrap();
        assert_eq!(p.critical_path(&[10, 20, 25]), 30);
        assert_eq!(p.critical_path(&[10, 20, 31]), 31);
        assert_eq!(Plan::single("x").critical_path(&[500]), 0);
    }

    #[test]
    fn bad_plans_are_rejected_with_their_reason() {
        assert_eq!(Plan::parse("not json", 8), Err(PlanError::NotJson));
        assert_eq!(Plan::parse(r#"{"steps": 3}"#, 8), Err(PlanError::NotJson));
        assert_eq!(Plan::parse(&plan(vec![]), 8), Err(PlanError::Empty));
        assert_eq!(
            Plan::parse(
                &plan(vec![step("a", &[]), step("b", &[]), step("c", &[])]),
                2
            ),
            Err(PlanError::TooManySteps { count: 3, max: 2 })
        );
        assert_eq!(
            Plan::parse(&plan(vec![step("a", &["zz"])]), 8),
            Err(PlanError::UnknownDependency {
                step: "a".into(),
                dependency: "zz".into()
            })
        );
        assert_eq!(
            Plan::parse(&plan(vec![step("a", &["b"]), step("b", &["a"])]), 8),
            Err(PlanError::Cycle("a".into()))
        );
        assert_eq!(
            Plan::parse(&plan(vec![step("a", &["a"])]), 8),
            Err(PlanError::Cycle("a".into()))
        );
        assert_eq!(
            Plan::parse(&plan(vec![step("a", &[]), step("a", &[])]), 8),
            Err(PlanError::DuplicateId("a".into()))
        );
        assert_eq!(
            Plan::parse(&plan(vec![step(" ", &[])]), 8),
            Err(PlanError::EmptyId)
        );
    }

    #[test]
    fn titles_become_one_short_line() {
        let p = Plan::parse(
            &json!({"steps": [{"id": "a", "title": "Run\nthe   tests", "instructions": "", "dependencies": []}]})
                .to_string(),
            8,
        )
        .unwrap();
        assert_eq!(p.steps()[0].title, "Run the tests");
        assert_eq!(p.steps()[0].instructions, "Run the tests");
        assert_eq!(one_line(&"x".repeat(300)).chars().count(), MAX_TITLE_CHARS);
    }

    #[test]
    fn schema_bounds_the_step_count() {
        assert_eq!(plan_schema(5)["properties"]["steps"]["maxItems"], json!(5));
    }
}
