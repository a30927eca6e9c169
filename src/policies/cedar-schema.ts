/**
 * The Cedar schema Barbican ships: the entity types, actions and context every Cedar policy is
 * written against and `barbican check` validates policy files with (docs/policy.md).
 */
export const CEDAR_SCHEMA = `namespace Barbican {
  // Who calls: the token's subject; its groups (claim "groups") and tenant are parents, its
  // claims are tags.
  entity Group;
  entity Tenant;
  entity User in [Group, Tenant] {
    tenant?: String,
    client?: String,
    scopes: Set<String>,
    authMethod: String,
  } tags String;

  // What is called: a virtual server, the upstreams behind it and their items. Every item carries
  // its pin state ("pinned": approved as served; "changed": differs from its approval and let
  // through with a warning; "unpinned": trust is off, or the kind is not pinned) and the operator
  // labels (contexts.labels) of the item and its upstream.
  entity Server;
  entity Upstream in [Server] { labels: Set<String> };
  type Annotations = {
    title?: String,
    readOnlyHint?: Bool,
    destructiveHint?: Bool,
    idempotentHint?: Bool,
    openWorldHint?: Bool,
  };
  entity Tool in [Upstream, Server] {
    name: String,
    upstream: String,
    annotations: Annotations,
    pinState: String,
    labels: Set<String>,
  };
  entity Prompt in [Upstream, Server] {
    name: String,
    upstream: String,
    pinState: String,
    labels: Set<String>,
  };
  entity Resource in [Upstream, Server] {
    uri: String,
    upstream: String,
    pinState: String,
    labels: Set<String>,
  };
  // A call's arguments: one tag per top-level argument, strings as they are, other values as JSON.
  entity Arguments tags String;

  // The session's labels: those that entered the caller's secure context (a legacy session, or
  // identity + client for stateless callers) within contexts.windowMs.
  type Context = {
    server: String,
    transport: String,
    method: String,
    time: Long,
    arguments: Arguments,
    labels: Set<String>,
  };

  action list appliesTo { principal: User, resource: Server, context: Context };
  action call appliesTo { principal: User, resource: Tool, context: Context };
  action get appliesTo { principal: User, resource: Prompt, context: Context };
  action read, subscribe appliesTo { principal: User, resource: Resource, context: Context };
  action complete appliesTo { principal: User, resource: [Prompt, Resource], context: Context };
}
`
