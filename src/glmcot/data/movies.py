"""An example graph in a shape GRBench lacks: movies, people and genres, written as Neo4j-style
CSV tables and as N-Triples, with questions whose gold plans the scripted policy follows.

It shows the path a user takes with their own graph: `glmcot data movies OUT`, then
`glmcot graph import OUT/tables` or `glmcot graph import OUT/movies.nt` (the commands are in
OUT/README.txt), then questions answered over the store without any hand-written domain.
Both imports give the same store shape (types Movie and Person, relations director and actor
with their `_of` reverses), so one questions file serves both.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from glmcot.data.questions import GLMStep, GraphCoTAction, Plan, QuestionRecord, write_questions

BASE_IRI = "http://example.org/movies/"
TEXT_PREDICATE = BASE_IRI + "title"
REVERSE_SUFFIX = "_of"
_FIRST = ["Ada", "Bruno", "Chiara", "Dmitri", "Elif", "Farah", "Goran", "Hana", "Ivo", "Jun", "Kira", "Lucas",
          "Mira", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Sven", "Tomoko"]
_LAST = ["Abara", "Berg", "Castell", "Duval", "Eriksen", "Fontaine", "Garza", "Holm", "Ibsen", "Jovic", "Kaur",
         "Lindqvist", "Moreau", "Novak", "Okafor", "Petrov", "Quispe", "Rahman", "Sato", "Tanaka"]
_WORDS = ["Silent", "Harbour", "Midnight", "Glass", "River", "Paper", "Crimson", "Orbit", "Lantern", "Winter",
          "Echo", "Garden", "Iron", "Velvet", "Signal", "Northern", "Hollow", "Amber", "Falling", "Copper"]
_NOUNS = ["Road", "Kingdom", "Letters", "Machine", "Summer", "Witness", "Tide", "Archive", "Circus", "Frontier"]
GENRES = ["Drama", "Comedy", "Thriller", "Science Fiction", "Documentary", "Romance", "Animation", "Western"]


@dataclass
class MoviesGraph:
    titles: list[str]
    years: list[int]
    genres: list[list[str]]
    names: list[str]
    born: list[int]
    director: list[int]  # person index per movie
    actors: list[list[int]]  # person indices per movie, in billing order

    def movie_id(self, index: int) -> str:
        return f"movie/{index + 1}"

    def person_id(self, index: int) -> str:
        return f"person/{index + 1}"


def generate(movies: int = 40, people: int = 30, seed: int = 7) -> MoviesGraph:
    rng = np.random.default_rng(seed)
    names: list[str] = []
    while len(names) < people:
        name = f"{_FIRST[rng.integers(len(_FIRST))]} {_LAST[rng.integers(len(_LAST))]}"
        if name not in names:
            names.append(name)
    titles: list[str] = []
    while len(titles) < movies:
        title = f"The {_WORDS[rng.integers(len(_WORDS))]} {_NOUNS[rng.integers(len(_NOUNS))]}"
        if title not in titles:
            titles.append(title)
    years = [int(year) for year in rng.integers(1960, 2024, size=movies)]
    genres = [[GENRES[i] for i in sorted(rng.choice(len(GENRES), size=2, replace=False).tolist())] for _ in range(movies)]
    born = [int(year) for year in rng.integers(1930, 2000, size=people)]
    director = [int(person) for person in rng.integers(people, size=movies)]
    actors = [sorted(rng.choice(people, size=int(rng.integers(2, 5)), replace=False).tolist()) for _ in range(movies)]
    return MoviesGraph(titles, years, genres, names, born, director, actors)


def _csv_field(text: str) -> str:
    return '"' + text.replace('"', '""') + '"' if any(c in text for c in ',"\n;') else text


def write_tables(graph: MoviesGraph, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [":ID,title,year:int,genres:string[],:LABEL"]
    for index, title in enumerate(graph.titles):
        lines.append(f"{graph.movie_id(index)},{_csv_field(title)},{graph.years[index]},{';'.join(graph.genres[index])},Movie")
    (folder / "movies.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    lines = [":ID,name,born:int,:LABEL"]
    for index, name in enumerate(graph.names):
        lines.append(f"{graph.person_id(index)},{_csv_field(name)},{graph.born[index]},Person")
    (folder / "people.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    lines = [":START_ID,:END_ID,:TYPE,weight:float"]
    for index in range(len(graph.titles)):
        lines.append(f"{graph.movie_id(index)},{graph.person_id(graph.director[index])},director,1.0")
        for billing, person in enumerate(graph.actors[index]):
            lines.append(f"{graph.movie_id(index)},{graph.person_id(person)},actor,{float(len(graph.actors[index]) - billing)}")
    (folder / "credits.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _literal(text: str) -> str:
    return json.dumps(text, ensure_ascii=True)  # N-Triples string escapes are JSON's for these texts


def write_triples(graph: MoviesGraph, path: Path) -> None:
    rdf_type = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
    integer = "<http://www.w3.org/2001/XMLSchema#integer>"
    lines = []
    for index, title in enumerate(graph.titles):
        movie = f"<{BASE_IRI}{graph.movie_id(index)}>"
        lines += [f"{movie} {rdf_type} <{BASE_IRI}Movie> .", f"{movie} <{BASE_IRI}title> {_literal(title)} .",
                  f'{movie} <{BASE_IRI}year> "{graph.years[index]}"^^{integer} .']
        lines += [f"{movie} <{BASE_IRI}genres> {_literal(genre)} ." for genre in graph.genres[index]]
        lines.append(f"{movie} <{BASE_IRI}director> <{BASE_IRI}{graph.person_id(graph.director[index])}> .")
        lines += [f"{movie} <{BASE_IRI}actor> <{BASE_IRI}{graph.person_id(person)}> ." for person in graph.actors[index]]
    for index, name in enumerate(graph.names):
        person = f"<{BASE_IRI}{graph.person_id(index)}>"
        lines += [f"{person} {rdf_type} <{BASE_IRI}Person> .", f"{person} <{BASE_IRI}name> {_literal(name)} .",
                  f'{person} <{BASE_IRI}born> "{graph.born[index]}"^^{integer} .']
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _record(number: int, template: str, question: str, answer: str, steps: list[GLMStep],
            actions: list[GraphCoTAction], entities: dict) -> QuestionRecord:
    return QuestionRecord(qid=f"movies-{number}", domain="movies", template=template, params={}, level="easy",
                          question=question, answer=answer, deterministic=True, plan=Plan(steps, actions),
                          entities=entities)


def questions(graph: MoviesGraph, count: int = 6) -> list[QuestionRecord]:
    """Director, release year and film count questions about distinct movies and people."""
    records = []
    for number in range(count):
        movie = number * 3 % len(graph.titles)
        title = graph.titles[movie]
        quoted = json.dumps(title)
        kind = number % 3
        if kind == 0:
            person = graph.director[movie]
            records.append(_record(
                number, "movies/director", f"Who directed {title}?", graph.names[person],
                [GLMStep(f"the name of the director of the movie {title}",
                         f"movie = RetrieveNode({quoted})\n"
                         f'print(", ".join(NodeFeature(p, "name") for p in NeighbourCheck(movie, "director")))')],
                [GraphCoTAction(f"I find the movie {title}.", f"RetrieveNode[{title}]"),
                 GraphCoTAction("I list its director.", "NeighbourCheck[$0, director]"),
                 GraphCoTAction("I read the director's name.", "NodeFeature[$1[*], name]"),
                 GraphCoTAction("I have the answer.", "Finish[$answer]")],
                {"movie": graph.movie_id(movie)}))
        elif kind == 1:
            records.append(_record(
                number, "movies/year", f"In which year was {title} released?", str(graph.years[movie]),
                [GLMStep(f"the release year of the movie {title}",
                         f'movie = RetrieveNode({quoted})\nprint(NodeFeature(movie, "year"))')],
                [GraphCoTAction(f"I find the movie {title}.", f"RetrieveNode[{title}]"),
                 GraphCoTAction("I read its year.", "NodeFeature[$0, year]"),
                 GraphCoTAction("I have the answer.", "Finish[$answer]")],
                {"movie": graph.movie_id(movie)}))
        else:
            person = graph.actors[movie][0]
            name = graph.names[person]
            films = sum(person in cast for cast in graph.actors)
            records.append(_record(
                number, "movies/films_of_actor", f"In how many movies did {name} act?", str(films),
                [GLMStep(f"the number of movies {name} acted in",
                         f'person = RetrieveNode({json.dumps(name)})\nprint(NodeDegree(person, "actor{REVERSE_SUFFIX}"))')],
                [GraphCoTAction(f"I find {name}.", f"RetrieveNode[{name}]"),
                 GraphCoTAction("I count the movies they acted in.", f"NodeDegree[$0, actor{REVERSE_SUFFIX}]"),
                 GraphCoTAction("I have the answer.", "Finish[$answer]")],
                {"person": graph.person_id(person)}))
    return records


def write_example(out: str | os.PathLike, movies: int = 40, people: int = 30, seed: int = 7, count: int = 6) -> dict:
    """Write OUT/tables/*.csv, OUT/movies.nt, OUT/questions.jsonl and OUT/README.txt; returns the paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    graph = generate(movies, people, seed)
    write_tables(graph, out / "tables")
    write_triples(graph, out / "movies.nt")
    write_questions(out / "questions.jsonl", questions(graph, count))
    commands = [
        f"glmcot graph import {out / 'tables'} --out {out / 'store-tables'} --reverse-suffix {REVERSE_SUFFIX}",
        f"glmcot graph import {out / 'movies.nt'} --out {out / 'store-triples'} --reverse-suffix {REVERSE_SUFFIX} "
        f"--id-prefix {BASE_IRI} --text-predicate {TEXT_PREDICATE}",
        f"glmcot eval --scripted --questions {out / 'questions.jsonl'} --graph {out / 'store-tables'} --method both",
    ]
    (out / "README.txt").write_text("An example movies graph (synthetic). Import and ask:\n" + "\n".join(commands) + "\n",
                                    encoding="utf-8")
    return {"tables": str(out / "tables"), "triples": str(out / "movies.nt"), "questions": str(out / "questions.jsonl"),
            "commands": commands}


__all__ = ["generate", "write_example", "questions", "BASE_IRI", "TEXT_PREDICATE", "REVERSE_SUFFIX"]
