//! [`Method`]: a JSON-RPC method name, parsed once where the message arrives.
//!
//! Every layer and the service match on this enum instead of comparing strings, so the set of
//! methods the server knows is written down once, here, with its wire names and the metrics
//! label of each.

use std::fmt;

/// The method of a request or notification.
///
/// Names this server does not know are kept as they arrived in [`Method::Other`], so a
/// `-32601 Method not found` can still quote them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    /// `server/discover` (2026-07-28).
    ServerDiscover,
    /// `initialize` (2025 era).
    Initialize,
    /// `ping` (2025 era).
    Ping,
    /// `logging/setLevel` (2025 era).
    LoggingSetLevel,
    ToolsList,
    ToolsCall,
    TasksGet,
    TasksCancel,
    /// `tasks/update` (the 2026 Tasks extension).
    TasksUpdate,
    /// `tasks/result` (2025-11-25 only).
    TasksResult,
    TasksList,
    /// `subscriptions/listen` (2026-07-28): a stream of notifications the client asks for.
    SubscriptionsListen,
    /// `notifications/initialized`.
    Initialized,
    /// `notifications/cancelled`.
    Cancelled,
    /// Any other name: an unknown request, or a notification we do not act on.
    Other(Box<str>),
}

/// `(method, wire name)` for every named method, in [`Method::label_index`] order.
const NAMED: [(Method, &str); 14] = [
    (Method::ServerDiscover, "server/discover"),
    (Method::Initialize, "initialize"),
    (Method::Ping, "ping"),
    (Method::ToolsList, "tools/list"),
    (Method::ToolsCall, "tools/call"),
    (Method::TasksGet, "tasks/get"),
    (Method::TasksCancel, "tasks/cancel"),
    (Method::TasksUpdate, "tasks/update"),
    (Method::TasksResult, "tasks/result"),
    (Method::TasksList, "tasks/list"),
    (Method::LoggingSetLevel, "logging/setLevel"),
    (Method::SubscriptionsListen, "subscriptions/listen"),
    (Method::Initialized, "notifications/initialized"),
    (Method::Cancelled, "notifications/cancelled"),
];

impl Method {
    /// Every value of the metrics `method` label: the request methods by name, then
    /// `notification` and `other` for anything else, so a client cannot grow the series set.
    pub const LABELS: [&'static str; 14] = [
        "server/discover",
        "initialize",
        "ping",
        "tools/list",
        "tools/call",
        "tasks/get",
        "tasks/cancel",
        "tasks/update",
        "tasks/result",
        "tasks/list",
        "logging/setLevel",
        "subscriptions/listen",
        "notification",
        "other",
    ];

    /// Parses a wire name (case-sensitive, as JSON-RPC is).
    pub fn parse(name: &str) -> Method {
        NAMED
            .iter()
            .find(|(_, wire)| *wire == name)
            .map_or_else(|| Method::Other(name.into()), |(m, _)| m.clone())
    }

    /// The wire name.
    pub fn as_str(&self) -> &str {
        match self {
            Method::Other(name) => name,
            known => known.static_name().unwrap_or(""),
        }
    }

    /// The wire name of a method this server knows; `None` for [`Method::Other`], whose name
    /// is client text.
    pub fn static_name(&self) -> Option<&'static str> {
        NAMED.iter().find(|(m, _)| m == self).map(|(_, wire)| *wire)
    }

    /// Is this a `tasks/*` method?
    pub fn is_tasks(&self) -> bool {
        matches!(
            self,
            Method::TasksGet
                | Method::TasksCancel
                | Method::TasksUpdate
                | Method::TasksResult
                | Method::TasksList
        )
    }

    /// The position of this method's label in [`Method::LABELS`].
    pub fn label_index(&self) -> usize {
        match self {
            Method::ServerDiscover => 0,
            Method::Initialize => 1,
            Method::Ping => 2,
            Method::ToolsList => 3,
            Method::ToolsCall => 4,
            Method::TasksGet => 5,
            Method::TasksCancel => 6,
            Method::TasksUpdate => 7,
            Method::TasksResult => 8,
            Method::TasksList => 9,
            Method::LoggingSetLevel => 10,
            Method::SubscriptionsListen => 11,
            Method::Initialized | Method::Cancelled => 12,
            Method::Other(name) if name.starts_with("notifications/") => 12,
            Method::Other(_) => 13,
        }
    }

    /// The metrics `method` label.
    pub fn label(&self) -> &'static str {
        Self::LABELS[self.label_index()]
    }
}

impl From<&str> for Method {
    fn from(name: &str) -> Method {
        Method::parse(name)
    }
}

impl From<String> for Method {
    fn from(name: String) -> Method {
        match Method::parse(&name) {
            Method::Other(_) => Method::Other(name.into_boxed_str()),
            known => known,
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for Method {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Method {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_method_round_trips_and_has_its_own_label() {
        for (i, (method, wire)) in NAMED.iter().enumerate() {
            assert_eq!(&Method::parse(wire), method, "{wire}");
            assert_eq!(method.as_str(), *wire);
            if i < 12 {
                assert_eq!(method.label_index(), i, "{wire}");
                assert_eq!(method.label(), *wire);
            } else {
                assert_eq!(method.label(), "notification", "{wire}");
            }
        }
    }

    #[test]
    fn unknown_names_are_kept_and_bounded_in_labels() {
        let m = Method::parse("resources/list");
        assert_eq!(m, Method::Other("resources/list".into()));
        assert_eq!(m.as_str(), "resources/list");
        assert_eq!(m.label(), "other");
        assert_eq!(Method::parse("Tools/List").label(), "other");
        assert_eq!(
            Method::parse("notifications/progress").label(),
            "notification"
        );
        assert_eq!(Method::from(String::from("tools/call")), Method::ToolsCall);
        assert!(Method::TasksList.is_tasks() && !Method::ToolsCall.is_tasks());
    }
}
