"""Questions embedded on one thread, those that arrive together in one model run.

A recall embeds its question in another thread while it reads its postings (the model
releases the GIL). Recalls running at once on one ``Memory`` would each start their own
model run, and on a small machine those runs take the cores from one another. Here a single
thread embeds: a question that arrives while a run is going waits for it, and every question
waiting then goes into the next run together. A run of several short questions costs much
less than running them one by one (MiniLM on 2 cores: 5.3 ms for one question, 7.2 ms for
two, 12.0 ms for four), and a lone question is embedded at once, as before.

Each question gets the row it would get alone: the embedder pads and masks a batch, and the
MiniLM rows of 64 questions were bit-identical batched and alone. An embedder of your own
must do the same for recalls to be repeatable under load.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future

from slm.embed.base import Embedder, Matrix
from slm.errors import EmbedderError

#: At most this many questions go into one run.
MOST = 16


class Questions:
    """Embeds questions for recalls: :meth:`submit` returns a future of the question's
    vector as a one-row matrix. The thread starts with the first question."""

    def __init__(self, embedder: Embedder, most: int = MOST) -> None:
        self._embedder = embedder
        self._most = most
        self._waiting: list[tuple[str, Future[Matrix]]] = []
        self._ready = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, text: str) -> Future[Matrix]:
        done: Future[Matrix] = Future()
        with self._ready:
            if self._closed:
                raise EmbedderError("cannot embed the question: this memory is closed")
            self._waiting.append((text, done))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="slm-questions", daemon=True
                )
                self._thread.start()
            self._ready.notify()
        return done

    def close(self) -> None:
        """Embed what is waiting, then stop the thread."""
        with self._ready:
            self._closed = True
            self._ready.notify()
            thread = self._thread
        if thread is not None:
            thread.join()

    def _serve(self) -> None:
        while True:
            with self._ready:
                while not self._waiting and not self._closed:
                    self._ready.wait()
                if not self._waiting:
                    return  # closed, nothing left
                taken, self._waiting = self._waiting[: self._most], self._waiting[self._most :]
            self._embed(taken)

    def _embed(self, taken: list[tuple[str, Future[Matrix]]]) -> None:
        try:
            vectors = self._embedder.embed_batch([text for text, _ in taken])
        except Exception as exc:  # every waiting recall sees the model's error
            for _, done in taken:
                done.set_exception(exc)
            return
        for row, (_, done) in enumerate(taken):
            done.set_result(vectors[row : row + 1])
