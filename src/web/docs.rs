//! `GET /api/docs`: the read-only API reference, rendered on the server from the same OpenAPI
//! document `GET /api/v1/openapi.json` serves ([`super::openapi::ApiDoc`]): every operation
//! grouped by tag with its parameters, request and response schemas and examples, then every
//! schema with its fields. The app's own template and stylesheet; no script, no CDN. Anyone may
//! read it (as the JSON document); a signed-in user keeps the navigation.

use askama::Template;
use askama_web::WebTemplate;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use utoipa::OpenApi;

use super::auth::{AuthRejection, CurrentUser};
use super::errors::PageError;
use super::layout::Layout;
use super::openapi::ApiDoc;
use super::view::{SafeHtml, render_markdown};
use crate::error::AppError;

/// The HTTP methods of an OpenAPI path item, in the order the page lists them.
const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

/// The reference page.
#[derive(Template, WebTemplate)]
#[template(path = "api/docs.html")]
struct DocsPage {
    layout: Layout,
    /// `info.title`.
    title: String,
    /// `info.version`.
    version: String,
    /// `info.description`, rendered.
    description: SafeHtml,
    /// Operations by tag, in the document's tag order.
    tags: Vec<TagView>,
    /// `components.schemas`, by name.
    schemas: Vec<SchemaView>,
}

/// A tag and its operations.
struct TagView {
    name: String,
    description: String,
    operations: Vec<OperationView>,
}

/// One operation.
struct OperationView {
    /// `operationId`: the element id it is linked by.
    id: String,
    /// `GET`, `POST`, …
    method: String,
    /// Lower-case method, for its CSS class.
    method_class: String,
    path: String,
    summary: String,
    description: SafeHtml,
    params: Vec<ParamView>,
    /// The request body's description, when it has one.
    request_description: Option<SafeHtml>,
    /// Whether the request body may be left out.
    request_optional: bool,
    request: Vec<BodyView>,
    responses: Vec<ResponseView>,
}

/// A path or query parameter.
struct ParamView {
    name: String,
    location: String,
    required: bool,
    kind: TypeLabel,
    description: SafeHtml,
    example: Option<String>,
}

/// A request or response body in one media type.
struct BodyView {
    media: String,
    kind: TypeLabel,
    /// Pretty JSON, or the text itself for a text example.
    example: Option<String>,
}

/// A response status.
struct ResponseView {
    status: String,
    description: SafeHtml,
    bodies: Vec<BodyView>,
}

/// A schema type in words, with the component it names (linked) when it is a reference.
struct TypeLabel {
    text: String,
    link: Option<String>,
}

/// A component schema.
struct SchemaView {
    name: String,
    description: SafeHtml,
    /// `allOf` references: "all fields of …".
    includes: Vec<String>,
    /// Enum values.
    values: Vec<String>,
    fields: Vec<FieldView>,
    /// The schema itself, pretty JSON.
    json: String,
}

/// A field of an object schema.
struct FieldView {
    name: String,
    kind: TypeLabel,
    required: bool,
    description: SafeHtml,
}

/// `GET /api/docs`.
pub(super) async fn page(user: Result<CurrentUser, AuthRejection>) -> Result<Response, PageError> {
    let doc = serde_json::to_value(ApiDoc::openapi()).map_err(|e| AppError::Internal(e.into()))?;
    let user = user.ok().map(|u| u.0);
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let tags = doc["tags"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| TagView {
            name: text(&t["name"]),
            description: text(&t["description"]),
            operations: operations(&doc, t["name"].as_str().unwrap_or_default()),
        })
        .collect();
    Ok(DocsPage {
        layout: Layout::new(user.as_ref(), "API reference"),
        title: text(&doc["info"]["title"]),
        version: text(&doc["info"]["version"]),
        description: render_markdown(doc["info"]["description"].as_str().unwrap_or_default()),
        tags,
        schemas: schemas(&doc),
    }
    .into_response())
}

/// The operations tagged `tag`, in path order.
fn operations(doc: &Value, tag: &str) -> Vec<OperationView> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for method in METHODS {
            let op = &item[method];
            let tagged = op["tags"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t == tag));
            if !tagged {
                continue;
            }
            let body = &op["requestBody"];
            out.push(OperationView {
                id: op["operationId"].as_str().unwrap_or(method).to_string(),
                method: method.to_uppercase(),
                method_class: method.to_string(),
                path: path.clone(),
                summary: op["summary"].as_str().unwrap_or_default().to_string(),
                description: render_markdown(op["description"].as_str().unwrap_or_default()),
                params: op["parameters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|p| ParamView {
                        name: p["name"].as_str().unwrap_or_default().to_string(),
                        location: p["in"].as_str().unwrap_or_default().to_string(),
                        required: p["required"].as_bool().unwrap_or(false),
                        kind: type_label(&p["schema"]),
                        description: render_markdown(p["description"].as_str().unwrap_or_default()),
                        example: p.get("example").map(example_text),
                    })
                    .collect(),
                request_description: body["description"].as_str().map(render_markdown),
                request_optional: !body["required"].as_bool().unwrap_or(false),
                request: bodies(&body["content"]),
                responses: op["responses"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(status, r)| ResponseView {
                        status: status.clone(),
                        description: render_markdown(r["description"].as_str().unwrap_or_default()),
                        bodies: bodies(&r["content"]),
                    })
                    .collect(),
            });
        }
    }
    out
}

/// The media types of a `content` object.
fn bodies(content: &Value) -> Vec<BodyView> {
    content
        .as_object()
        .into_iter()
        .flatten()
        .map(|(media, c)| BodyView {
            media: media.clone(),
            kind: type_label(&c["schema"]),
            example: c.get("example").map(example_text),
        })
        .collect()
}

/// An example as shown: a string as it is (a text body), anything else as pretty JSON.
fn example_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// The type of `schema` in words: a component name (linked), `array of …`, `… or null`, the
/// JSON type, or `any`.
fn type_label(schema: &Value) -> TypeLabel {
    let plain = |text: String| TypeLabel { text, link: None };
    if let Some(r) = schema["$ref"].as_str() {
        let name = r.rsplit('/').next().unwrap_or(r).to_string();
        return TypeLabel {
            link: Some(format!("schema-{name}")),
            text: name,
        };
    }
    if let Some(alternatives) = schema["oneOf"].as_array() {
        let labels: Vec<TypeLabel> = alternatives.iter().map(type_label).collect();
        let link = labels.iter().find_map(|l| l.link.clone());
        let text = labels
            .into_iter()
            .map(|l| l.text)
            .collect::<Vec<_>>()
            .join(" or ");
        return TypeLabel { text, link };
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if types.contains(&"array") {
        let item = type_label(&schema["items"]);
        let null = if types.contains(&"null") {
            " or null"
        } else {
            ""
        };
        return TypeLabel {
            text: format!("array of {}{null}", item.text),
            link: item.link,
        };
    }
    if types.contains(&"object") && schema["additionalProperties"].is_object() {
        let value = type_label(&schema["additionalProperties"]);
        return TypeLabel {
            text: format!("map of {}", value.text),
            link: value.link,
        };
    }
    if types.is_empty() {
        return plain("any".into());
    }
    let mut text = types.join(" or ");
    if let Some(format) = schema["format"].as_str() {
        text.push_str(&format!(" ({format})"));
    }
    if let Some(values) = schema["enum"].as_array() {
        let values: Vec<String> = values.iter().map(example_text).collect();
        text.push_str(&format!(": {}", values.join(", ")));
    }
    plain(text)
}

/// Every component schema with its fields (its own and those of its `allOf` parts that are not
/// references), enum values and the schema as JSON.
fn schemas(doc: &Value) -> Vec<SchemaView> {
    doc["components"]["schemas"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, schema)| {
            let parts: Vec<&Value> = match schema["allOf"].as_array() {
                Some(parts) => parts.iter().collect(),
                None => vec![schema],
            };
            let includes = parts
                .iter()
                .filter_map(|p| p["$ref"].as_str())
                .map(|r| r.rsplit('/').next().unwrap_or(r).to_string())
                .collect();
            let fields = parts
                .iter()
                .flat_map(|p| {
                    let required: Vec<&str> = p["required"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect();
                    p["properties"]
                        .as_object()
                        .into_iter()
                        .flatten()
                        .map(move |(field, s)| FieldView {
                            name: field.clone(),
                            kind: type_label(s),
                            required: required.contains(&field.as_str()),
                            description: render_markdown(
                                s["description"].as_str().unwrap_or_default(),
                            ),
                        })
                })
                .collect();
            SchemaView {
                name: name.clone(),
                description: render_markdown(schema["description"].as_str().unwrap_or_default()),
                includes,
                values: schema["enum"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(example_text)
                    .collect(),
                fields,
                json: serde_json::to_string_pretty(schema).unwrap_or_default(),
            }
        })
        .collect()
}
