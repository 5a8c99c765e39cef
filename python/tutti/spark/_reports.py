"""The channel from each rank's Spark task to the driver, for the length of one `run`.

Driver side (`ReportServer`): a listener on an OS-chosen port at the coordinator's host, one
reader thread per task connection, every message and every closed connection delivered as an
event to the queue that `run` waits on. Executor side (`Reporter`): one connection per task,
opened before `fn` and closed after it. Messages are pickled, so the connection authenticates
both ends with a random key the driver ships in the task's closure (multiprocessing.connection's
HMAC challenge): nobody else can feed the driver a pickle.

Messages (tuples), each naming its task by a `key` (the rank in `run`, (partition, attempt) in
`run_elastic`): ("connected", key), ("hello", key, info), ("out"|"err", key, text), ("done", key),
("failed", key, type name, message, traceback text, pickled exception or None).
The driver adds ("closed", key) when a connection ends, whatever the reason, and appends to
"hello" a `reply` callable: the one message the driver sends a task (run_elastic's admission,
which the task waits for with Reporter.receive).
"""
import io
import pickle
import secrets
import threading
from multiprocessing.connection import Client, Listener


class ReportServer:
    def __init__(self, bind_host, advertised_host, events):
        self.authkey = secrets.token_bytes(32)
        self._listener = Listener((bind_host, 0), authkey=self.authkey)
        self.address = (advertised_host, self._listener.address[1])
        self._events = events
        self._closed = False
        self._connections = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name="tutti.spark reports", daemon=True).start()

    def _accept(self):
        while True:
            try:
                connection = self._listener.accept()
            except OSError:
                return  # closed by close()
            except Exception:  # a peer that failed the authentication: ignore it
                continue
            with self._lock:
                if self._closed:
                    connection.close()
                    return
                self._connections.append(connection)
            threading.Thread(target=self._read, args=(connection,), daemon=True).start()

    def _read(self, connection):
        key = None
        try:
            while True:
                message = connection.recv()
                key = message[1]
                if message[0] == "hello":
                    message += (lambda *reply: _send_quietly(connection, reply),)
                self._events.put(message)
        except (EOFError, OSError):
            pass
        finally:
            if key is not None:
                self._events.put(("closed", key))

    def close(self):
        with self._lock:
            self._closed = True
            connections, self._connections = self._connections, []
        self._listener.close()
        for connection in connections:
            connection.close()


def _send_quietly(connection, message):
    """A reply to a task whose connection may have closed meanwhile (its end is an event too)."""
    try:
        connection.send(message)
    except (OSError, ValueError):
        pass


class Reporter:
    """A task's end of the channel; thread-safe (fn's threads may print)."""

    def __init__(self, address, authkey, key):
        self.key = key
        self._connection = Client(tuple(address), authkey=authkey)
        self._lock = threading.Lock()
        self.send("connected")  # from now on the driver notices if this process dies

    def send(self, *message):
        with self._lock:
            self._connection.send(message[:1] + (self.key,) + message[1:])

    def receive(self, timeout_s):
        """The driver's reply to "hello", or None if none came within timeout_s. Called before
        fn runs, so nothing else reads the connection."""
        if not self._connection.poll(timeout_s):
            return None
        return self._connection.recv()

    def failed(self, exception, traceback_text):
        try:
            pickled = pickle.dumps(exception)
        except Exception:  # an exception that does not pickle still reports its type and text
            pickled = None
        self.send("failed", type(exception).__name__, str(exception), traceback_text, pickled)

    def close(self):
        with self._lock:
            self._connection.close()


class ForwardedStream(io.TextIOBase):
    """sys.stdout or sys.stderr of `fn`: complete lines go to the driver as they are written,
    the rest at flush (and when fn ends)."""

    def __init__(self, reporter, kind):
        self._reporter, self._kind = reporter, kind
        self._pending = ""
        self._lock = threading.Lock()

    def writable(self):
        return True

    def write(self, text):
        with self._lock:
            self._pending += text
            complete, newline, self._pending = self._pending.rpartition("\n")
            if newline:
                self._reporter.send(self._kind, complete + newline)
        return len(text)

    def flush(self):
        with self._lock:
            if self._pending:
                self._reporter.send(self._kind, self._pending)
                self._pending = ""
