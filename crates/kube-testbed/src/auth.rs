//! Bearer-token authentication and RBAC-like authorization rules.

use std::collections::HashMap;

use crate::store::ApiError;

/// One permission, like a row of an RBAC `Role`: verbs on a resource of an API
/// group, optionally restricted to a namespace and to object names.
///
/// `"*"` matches any verb, group or resource. A subresource is written
/// `"secrets/status"`. With names, LIST and WATCH are allowed only when the
/// field selector pins `metadata.name` to one of them (like Kubernetes RBAC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    verbs: Vec<String>,
    group: String,
    resource: String,
    namespace: Option<String>,
    names: Vec<String>,
}

impl Rule {
    /// `verbs` on `resource` (plural, e.g. `"secrets"`) of `group` (`""` is the core group),
    /// in every namespace and for every name.
    pub fn new(verbs: &[&str], group: &str, resource: &str) -> Self {
        Self {
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            group: group.to_string(),
            resource: resource.to_string(),
            namespace: None,
            names: Vec::new(),
        }
    }

    /// Restrict the rule to one namespace (it then never matches cluster-scoped requests).
    pub fn namespace(mut self, ns: &str) -> Self {
        self.namespace = Some(ns.to_string());
        self
    }

    /// Restrict the rule to these object names.
    pub fn names(mut self, names: &[&str]) -> Self {
        self.names = names.iter().map(|s| s.to_string()).collect();
        self
    }

    fn allows(&self, req: &Attributes<'_>) -> bool {
        let verb_ok = self.verbs.iter().any(|v| v == "*" || v == req.verb);
        let group_ok = self.group == "*" || self.group == req.group;
        let resource_ok = self.resource == "*" || self.resource == req.resource;
        let ns_ok = match &self.namespace {
            None => true,
            Some(ns) => req.namespace == Some(ns.as_str()),
        };
        let name_ok =
            self.names.is_empty() || req.name.is_some_and(|n| self.names.iter().any(|x| x == n));
        verb_ok && group_ok && resource_ok && ns_ok && name_ok
    }
}

/// What a request wants to do.
pub(crate) struct Attributes<'a> {
    pub verb: &'a str,
    pub group: &'a str,
    /// plural, or `plural/subresource`
    pub resource: &'a str,
    pub namespace: Option<&'a str>,
    pub name: Option<&'a str>,
}

struct Subject {
    user: String,
    /// `None`: allowed everything.
    rules: Option<Vec<Rule>>,
}

/// The known tokens. Tokens never appear in messages; users are named by a
/// counter, one name per token for the token's life (a re-added token keeps its
/// name; a new token never reuses one).
pub(crate) struct Authenticator {
    tokens: HashMap<String, Subject>,
    next_user: usize,
}

impl Authenticator {
    pub(crate) fn new(admin_token: &str) -> Self {
        let mut tokens = HashMap::new();
        tokens.insert(
            admin_token.to_string(),
            Subject {
                user: "testbed-admin".into(),
                rules: None,
            },
        );
        Self {
            tokens,
            next_user: 1,
        }
    }

    pub(crate) fn add_token(&mut self, token: &str, rules: Vec<Rule>) {
        let user = match self.tokens.get(token) {
            Some(existing) => existing.user.clone(),
            None => {
                let user = format!("testbed-user-{}", self.next_user);
                self.next_user += 1;
                user
            }
        };
        self.tokens.insert(
            token.to_string(),
            Subject {
                user,
                rules: Some(rules),
            },
        );
    }

    /// Forget `token`: its requests get 401 from now on.
    pub(crate) fn revoke_token(&mut self, token: &str) {
        self.tokens.remove(token);
    }

    /// The user name for an `Authorization` header value, or 401.
    pub(crate) fn authenticate(&self, header: Option<&str>) -> Result<&str, ApiError> {
        let token = header
            .and_then(|h| {
                h.strip_prefix("Bearer ")
                    .or_else(|| h.strip_prefix("bearer "))
            })
            .map(str::trim);
        token
            .and_then(|t| self.tokens.get(t))
            .map(|s| s.user.as_str())
            .ok_or_else(|| ApiError::new(401, "Unauthorized", "Unauthorized"))
    }

    /// 403 unless the user may do this.
    pub(crate) fn authorize(&self, user: &str, req: &Attributes<'_>) -> Result<(), ApiError> {
        let Some(subject) = self.tokens.values().find(|s| s.user == user) else {
            return Err(ApiError::new(401, "Unauthorized", "Unauthorized"));
        };
        let allowed = match &subject.rules {
            None => true,
            Some(rules) => rules.iter().any(|r| r.allows(req)),
        };
        if allowed {
            return Ok(());
        }
        let (res, sub) = match req.resource.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => (req.resource, None),
        };
        let label = if req.group.is_empty() {
            res.to_string()
        } else {
            format!("{res}.{}", req.group)
        };
        let what = match req.name {
            Some(n) => format!("{label} \"{n}\""),
            None => label.clone(),
        };
        let sub_text = sub
            .map(|s| format!(" with subresource \"{s}\""))
            .unwrap_or_default();
        let scope = match req.namespace {
            Some(ns) => format!(" in the namespace \"{ns}\""),
            None => " at the cluster scope".to_string(),
        };
        let mut e = ApiError::new(
            403,
            "Forbidden",
            format!(
                "{what} is forbidden: User \"{user}\" cannot {} resource \"{res}\"{sub_text} in API group \"{}\"{scope}",
                req.verb, req.group
            ),
        );
        e.details = Some(crate::store::details(
            req.name.unwrap_or(""),
            req.group,
            res,
        ));
        Err(e)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn each_token_has_its_own_user_even_after_re_adding() {
        let mut a = Authenticator::new("admin");
        let secrets = |ns: &str| vec![Rule::new(&["get"], "", "secrets").namespace(ns)];
        a.add_token("t1", secrets("one"));
        let first = a.authenticate(Some("Bearer t1")).unwrap().to_string();
        a.add_token("t1", secrets("one"));
        a.add_token("t2", secrets("two"));
        let t1 = a.authenticate(Some("Bearer t1")).unwrap().to_string();
        let t2 = a.authenticate(Some("Bearer t2")).unwrap().to_string();
        assert_eq!(first, t1, "a re-added token keeps its user");
        assert_ne!(t1, t2, "a new token shares a user name");
        let get = |ns| Attributes {
            verb: "get",
            group: "",
            resource: "secrets",
            namespace: Some(ns),
            name: Some("x"),
        };
        assert!(a.authorize(&t2, &get("two")).is_ok());
        assert_eq!(a.authorize(&t2, &get("one")).unwrap_err().code, 403);
        assert!(a.authorize(&t1, &get("one")).is_ok());
        assert_eq!(a.authorize(&t1, &get("two")).unwrap_err().code, 403);
    }

    #[test]
    fn rules_restrict() {
        let mut a = Authenticator::new("admin");
        a.add_token(
            "t",
            vec![
                Rule::new(&["get", "list"], "", "secrets")
                    .namespace("ns")
                    .names(&["x"]),
            ],
        );
        let user = a.authenticate(Some("Bearer t")).unwrap().to_string();
        let req = |verb, ns, name| Attributes {
            verb,
            group: "",
            resource: "secrets",
            namespace: ns,
            name,
        };
        assert!(
            a.authorize(&user, &req("get", Some("ns"), Some("x")))
                .is_ok()
        );
        assert_eq!(
            a.authorize(&user, &req("get", Some("ns"), Some("y")))
                .unwrap_err()
                .code,
            403
        );
        assert_eq!(
            a.authorize(&user, &req("get", Some("other"), Some("x")))
                .unwrap_err()
                .code,
            403
        );
        assert_eq!(
            a.authorize(&user, &req("delete", Some("ns"), Some("x")))
                .unwrap_err()
                .code,
            403
        );
        assert_eq!(
            a.authorize(&user, &req("list", Some("ns"), None))
                .unwrap_err()
                .code,
            403
        );
        assert!(
            a.authorize("testbed-admin", &req("delete", None, None))
                .is_ok()
        );
        assert_eq!(a.authenticate(Some("Bearer nope")).unwrap_err().code, 401);
        assert_eq!(a.authenticate(None).unwrap_err().code, 401);
    }
}
