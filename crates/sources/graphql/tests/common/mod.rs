//! A small GraphQL server (async-graphql behind axum) on 127.0.0.1 for end-to-end tests.
//!
//! Schema: books with an enum genre, a recursive filter input, a mutation taking an input
//! object, a field that always fails, and a field echoing the request's `Authorization` header.
//! `/fail` answers HTTP 500.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use async_graphql::{
    Context, EmptySubscription, Enum, InputObject, Object, Result as GqlResult, Schema,
    SimpleObject, ID,
};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};

/// A book's genre.
#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug)]
pub enum Genre {
    Fiction,
    Science,
    History,
}

/// A person who writes books.
#[derive(SimpleObject, Clone)]
pub struct Author {
    /// Full name.
    pub name: String,
    pub born: Option<i32>,
}

/// A book on the shelf.
#[derive(SimpleObject, Clone)]
pub struct Book {
    pub id: ID,
    /// The title.
    pub title: String,
    pub genre: Genre,
    pub pages: i32,
    pub rating: Option<f64>,
    pub author: Author,
}

/// Which books to list.
#[derive(InputObject)]
pub struct BookFilter {
    pub genre: Option<Genre>,
    pub min_pages: Option<i32>,
    /// Matches when any of these filters matches.
    pub any: Option<Vec<BookFilter>>,
}

impl BookFilter {
    fn matches(&self, b: &Book) -> bool {
        let own =
            self.genre.is_none_or(|g| g == b.genre) && self.min_pages.is_none_or(|m| b.pages >= m);
        let any = match &self.any {
            Some(list) if !list.is_empty() => list.iter().any(|f| f.matches(b)),
            _ => true,
        };
        own && any
    }
}

/// A new book.
#[derive(InputObject)]
pub struct BookInput {
    pub title: String,
    pub genre: Genre,
    pub pages: Option<i32>,
    pub author_name: String,
}

type Shelf = Arc<Mutex<Vec<Book>>>;

/// The caller's `Authorization` header, if any.
#[derive(Clone)]
struct Auth(Option<String>);

pub struct QueryRoot;

#[Object]
impl QueryRoot {
    /// One book by id.
    async fn book(&self, ctx: &Context<'_>, id: ID) -> Option<Book> {
        let shelf = ctx.data_unchecked::<Shelf>().lock().unwrap();
        shelf.iter().find(|b| b.id == id).cloned()
    }

    /// Books matching a filter.
    async fn books(
        &self,
        ctx: &Context<'_>,
        filter: Option<BookFilter>,
        #[graphql(default = 10)] first: i32,
    ) -> Vec<Book> {
        let shelf = ctx.data_unchecked::<Shelf>().lock().unwrap();
        shelf
            .iter()
            .filter(|b| filter.as_ref().is_none_or(|f| f.matches(b)))
            .take(first.max(0) as usize)
            .cloned()
            .collect()
    }

    /// How many books there are.
    async fn count(&self, ctx: &Context<'_>) -> i32 {
        ctx.data_unchecked::<Shelf>().lock().unwrap().len() as i32
    }

    /// Always fails.
    async fn broken(&self) -> GqlResult<String> {
        Err("the shelf is on fire".into())
    }

    /// The Authorization header the server saw.
    async fn whoami(&self, ctx: &Context<'_>) -> Option<String> {
        ctx.data_opt::<Auth>().and_then(|a| a.0.clone())
    }
}

pub struct MutationRoot;

#[Object]
impl MutationRoot {
    /// Adds a book and returns it.
    async fn add_book(&self, ctx: &Context<'_>, input: BookInput) -> Book {
        let mut shelf = ctx.data_unchecked::<Shelf>().lock().unwrap();
        let book = Book {
            id: ID::from(format!("{}", shelf.len() + 1)),
            title: input.title,
            genre: input.genre,
            pages: input.pages.unwrap_or(100),
            rating: None,
            author: Author {
                name: input.author_name,
                born: None,
            },
        };
        shelf.push(book.clone());
        book
    }
}

pub type LibrarySchema = Schema<QueryRoot, MutationRoot, EmptySubscription>;

pub fn schema() -> LibrarySchema {
    let shelf: Shelf = Arc::new(Mutex::new(vec![
        Book {
            id: ID::from("1"),
            title: "Dune".into(),
            genre: Genre::Fiction,
            pages: 412,
            rating: Some(4.5),
            author: Author {
                name: "Frank Herbert".into(),
                born: Some(1920),
            },
        },
        Book {
            id: ID::from("2"),
            title: "Cosmos".into(),
            genre: Genre::Science,
            pages: 365,
            rating: None,
            author: Author {
                name: "Carl Sagan".into(),
                born: Some(1934),
            },
        },
    ]));
    Schema::build(QueryRoot, MutationRoot, EmptySubscription)
        .data(shelf)
        .finish()
}

async fn graphql(
    State(schema): State<LibrarySchema>,
    headers: HeaderMap,
    Json(req): Json<async_graphql::Request>,
) -> Json<async_graphql::Response> {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    Json(schema.execute(req.data(Auth(auth))).await)
}

async fn fail() -> (StatusCode, &'static str) {
    (StatusCode::INTERNAL_SERVER_ERROR, "upstream exploded")
}

/// Starts the server; returns its base URL (`http://127.0.0.1:PORT`). It runs until the test's
/// runtime ends.
pub async fn start() -> String {
    let app = Router::new()
        .route("/graphql", post(graphql))
        .route("/fail", post(fail))
        .with_state(schema());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    format!("http://{addr}")
}

/// A URL on 127.0.0.1 where nothing listens.
pub async fn closed_url() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}/graphql")
}

/// The OAuth2 client secret `/oauth/token` accepts (for client `client-1`).
pub const CLIENT_SECRET: &str = "gql-client-secret-1";
/// `Basic base64("client-1:gql-client-secret-1")`.
const CLIENT_BASIC: &str = "Basic Y2xpZW50LTE6Z3FsLWNsaWVudC1zZWNyZXQtMQ==";
/// The API key `/graphql` accepts in the `X-Api-Key` header or the `api_key` query parameter.
pub const API_KEY: &str = "gql-api-key-2";
/// The basic-auth password `/graphql` accepts for user `ann`.
pub const BASIC_PASSWORD: &str = "gql-basic-pw-3";
/// `Basic base64("ann:gql-basic-pw-3")`.
pub const BASIC_HEADER: &str = "Basic YW5uOmdxbC1iYXNpYy1wdy0z";

/// State of the guarded server: token requests served and the credentials each GraphQL
/// request carried.
#[derive(Clone)]
pub struct Guarded {
    schema: LibrarySchema,
    pub token_hits: Arc<std::sync::atomic::AtomicUsize>,
    /// One line per accepted GraphQL request: the credential it was accepted for.
    pub seen: Arc<Mutex<Vec<String>>>,
}

/// Starts a server whose `/graphql` needs credentials: a bearer token issued by its
/// `/oauth/token` (client credentials grant, client `client-1`), the API key in `X-Api-Key` or
/// `?api_key=`, or basic auth for `ann`. Anything else is answered 401. Returns the base URL.
pub async fn start_guarded() -> (String, Guarded) {
    use axum::extract::RawQuery;
    use axum::response::IntoResponse;
    use std::sync::atomic::Ordering;

    let state = Guarded {
        schema: schema(),
        token_hits: Arc::default(),
        seen: Arc::default(),
    };
    let header = |h: &HeaderMap, n: &str| {
        h.get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let app = Router::new()
        .route(
            "/oauth/token",
            post(
                move |State(s): State<Guarded>, h: HeaderMap, body: String| async move {
                    if header(&h, "authorization") != CLIENT_BASIC
                        || !body.contains("grant_type=client_credentials")
                    {
                        return (StatusCode::UNAUTHORIZED, "invalid_client").into_response();
                    }
                    let n = s.token_hits.fetch_add(1, Ordering::SeqCst) + 1;
                    Json(serde_json::json!({
                        "access_token": format!("gql-token-{n}"),
                        "token_type": "bearer",
                        "expires_in": 3600
                    }))
                    .into_response()
                },
            ),
        )
        .route(
            "/graphql",
            post(
                move |State(s): State<Guarded>,
                      h: HeaderMap,
                      RawQuery(q): RawQuery,
                      Json(req): Json<async_graphql::Request>| async move {
                    let auth = header(&h, "authorization");
                    let query_key = q
                        .unwrap_or_default()
                        .split('&')
                        .any(|kv| kv == format!("api_key={API_KEY}"));
                    let seen = if auth.starts_with("Bearer gql-token-") {
                        auth.clone()
                    } else if header(&h, "x-api-key") == API_KEY {
                        "api key header".to_string()
                    } else if query_key {
                        "api key query".to_string()
                    } else if auth == BASIC_HEADER {
                        "basic".to_string()
                    } else {
                        return (StatusCode::UNAUTHORIZED, "credentials required").into_response();
                    };
                    s.seen.lock().unwrap().push(seen);
                    let auth = (!auth.is_empty()).then_some(auth);
                    Json(s.schema.execute(req.data(Auth(auth))).await).into_response()
                },
            ),
        )
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (format!("http://{addr}"), state)
}
