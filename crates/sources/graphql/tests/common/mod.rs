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
