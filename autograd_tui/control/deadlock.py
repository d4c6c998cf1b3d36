"""Why nothing can move: the wait-for graph, its cycle, and the words for it.

Not in PyTorch.  When no thread may pass a gate and the program has not finished,
the controller asks here, handing over a ``ThreadsSnapshot`` (``table.py``: frozen
copies of its threads, taken under its lock), the run's History and the engine (its
options and the reentrant pool's backlog); nothing here reads the controller.  Each
waiting thread points at what it waits on (a ReadyQueue, a GraphTask's future, a lock,
a signal, the reentrant pool) and each of those at the threads that could free it; a
cycle is a deadlock, a dead end a lost wake-up, and a thread the user paused is "not a
deadlock".  The queue contents and node names come from the run's ``History`` (its head
state), like every view.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import networkx as nx

    from autograd_tui.control.table import ThreadSnapshot, ThreadsSnapshot
    from autograd_tui.engine.engine import Engine
    from autograd_tui.history import History


@dataclass
class DeadlockReport:
    real: bool  # False: blocked only because of a thread the user paused
    explanation: str
    cycle: list[str]
    threads: dict[str, str]
    graph: nx.DiGraph
    kind: str = "cycle"  # cycle | lost-wakeup | paused | stuck

    def __str__(self) -> str:
        return self.explanation


def stuck_report(thread: str, seconds: float, threads: dict[str, str],
                 where: str = "") -> DeadlockReport:
    """``thread`` stopped reaching gates and computes nothing (it uses no CPU): blocked
    where the controller cannot see, at ``where`` (its line, ``threads.where_waits``)."""
    msg = (f"{thread} has not reached a gate for {seconds:.1f} s and computes nothing (it "
           "uses no CPU): it is blocked in something the controller cannot see (an "
           "uninstrumented lock, sleep or I/O in user code)"
           + (f", at {where}." if where else "."))
    import networkx as nx  # wait_for_graph says why it is imported here

    return DeadlockReport(False, msg, [], threads, nx.DiGraph(), "stuck")


def current_node(history: History, thread: str) -> str | None:
    """The name of the node ``thread`` runs (its innermost), if any."""
    state = history.latest()
    th = state.threads.get(thread)
    return state.node_name(th.node) if th is not None and th.nodes else None


def queue_consumers(history: History) -> dict[str, list[str]]:
    """Queue -> the threads seen popping it or waiting on it (who could drain it)."""
    out: dict[str, list[str]] = {}
    for e in list(history.events):
        if e.kind == "pop" or (e.kind == "thread_wait" and e.data["on"] == "queue"):
            cons = out.setdefault(e.queue, [])  # type: ignore[arg-type]
            if e.thread not in cons:
                cons.append(e.thread)
    return out


def wait_for_graph(snap: ThreadsSnapshot, history: History, engine: Engine) -> nx.DiGraph:
    """Threads, queues, futures, locks and the pool, with an edge from each waiter
    to what it waits on, and from each object to the threads that could free it."""
    import networkx as nx  # here: a tenth of a second to import, and most runs never ask

    g = nx.DiGraph()
    infos = snap.threads
    state = history.latest()
    stacks = {name: th.nodes for name, th in state.threads.items()}
    queue_tasks = {q: [(t[0], t[1]) for t in state.queue_order(q)] for q in state.heaps}
    consumers = queue_consumers(history)
    mid_node = [t for t in infos if stacks.get(t.name) and t.state != "finished"]
    pool_threads = [t for t in infos if t.name.startswith("reentrant-pool-")
                    and t.state != "finished" and t.waiting_kind != "pool"]
    backlog = {gt.id for ref in list(engine.thread_pool_shared.graphtasks_queue)
               if (gt := ref()) is not None}

    def tnode(name: str) -> str:
        return f"thread {name}"

    def add_queue(qname: str) -> str:
        node = f"queue {qname}"
        g.add_node(node, kind="queue")
        if queue_tasks.get(qname):
            for c in consumers.get(qname, []):
                if (ct := snap.get(c)) is not None and ct.state != "finished":
                    g.add_edge(node, tnode(c), why="pops")
        return node

    for t in infos:
        if t.state == "finished":
            continue
        g.add_node(tnode(t.name), kind="thread")
    for t in infos:
        if t.state != "waiting":
            continue
        kind, target = t.waiting_kind, t.target
        me = tnode(t.name)
        if kind == "queue":
            q = add_queue(target)  # type: ignore[arg-type]
            g.add_edge(me, q, why="waits")
            for m in mid_node:
                if m is not t:
                    g.add_edge(q, tnode(m.name), why="could push")
        elif kind == "future":
            gid = t.graph_task
            f = f"future GraphTask {gid}"
            g.add_node(f, kind="future")
            g.add_edge(me, f, why="waits")
            for qname, tasks in queue_tasks.items():
                if any(gt == gid for gt, _ in tasks):
                    g.add_edge(f, add_queue(qname), why="task in")
            for m in mid_node:
                if any(gt == gid for gt, _ in stacks.get(m.name, ())) and m is not t:
                    g.add_edge(f, tnode(m.name), why="runs a node of it")
            if gid in backlog:
                g.add_node("reentrant pool", kind="pool")
                g.add_edge(f, "reentrant pool", why="waits for a pool thread")
                for p in pool_threads:
                    g.add_edge("reentrant pool", tnode(p.name), why="busy")
        elif kind == "lock":
            lk = f"lock {target}"
            g.add_node(lk, kind="lock")
            g.add_edge(me, lk, why="waits")
            if t.holder is not None:
                g.add_edge(lk, tnode(t.holder), why="held by")
        elif kind == "signal":
            s = f"signal {target}"
            g.add_node(s, kind="signal")
            g.add_edge(me, s, why="waits")
            set_by = t.set_by
            if set_by and snap.get(set_by) is not None:
                g.add_edge(s, tnode(set_by), why="set by")
            elif set_by and set_by.startswith("cuda:"):
                # A device thread starts with the first task pushed to its queue.
                q = add_queue(set_by)
                g.add_edge(s, q, why="set by a thread not started")
                for m in mid_node:
                    g.add_edge(q, tnode(m.name), why="could push")
        elif kind == "pool":
            g.add_node("reentrant pool", kind="pool")
    return g

def analyse(snap: ThreadsSnapshot, history: History, engine: Engine) -> DeadlockReport:
    """Explain why nothing can move (call when no thread is eligible)."""
    import networkx as nx

    g = wait_for_graph(snap, history, engine)
    threads = snap.words()
    infos = list(snap.threads)  # by number
    paused = [t for t in infos if t.state == "paused" and t.user_paused]
    if paused:
        names = ", ".join(t.name for t in paused)
        blocked = []
        for t in infos:
            if t.state == "waiting":
                st = snap.statuses[t.name]
                via = ""
                if st.holder and snap.get(st.holder) in paused:
                    via = f" (held by {st.holder}, which you paused)"
                blocked.append(f"{t.name} is {st.detail}{via}")
        text = (f"Not a deadlock: nothing can move only because you paused {names}. "
                + ("; ".join(blocked) + ". " if blocked else "")
                + "Resume or step a paused thread to go on.")
        return DeadlockReport(False, text, [], threads, g, "paused")
    cycle: list[str] = []
    for t in infos:
        if t.state != "waiting":
            continue
        try:
            edges = nx.find_cycle(g, source=f"thread {t.name}")
        except nx.NetworkXNoCycle:
            continue
        cycle = [u for u, _ in edges]
        break
    text = _explain(history, engine, g, cycle, infos)
    if cycle:
        return DeadlockReport(True, text, cycle, threads, g, "cycle")
    # No cycle: report the chain of waits from the program's thread to its dead end.
    chain: list[str] = []
    node = next((f"thread {t.name}" for t in infos if t.state == "waiting"), None)
    while node is not None and node not in chain:
        chain.append(node)
        succ = sorted(g.successors(node)) if node in g else []
        node = succ[0] if succ else None
    return DeadlockReport(True, text, chain, threads, g, "lost-wakeup")

def _explain(history: History, engine: Engine, g: nx.DiGraph, cycle: list[str],
             infos: list[ThreadSnapshot]) -> str:
    if not cycle:
        # No cycle: a wait that nothing will ever satisfy (a lost wake-up).
        program = next((t for t in infos if t.index == 1), None)
        start = program if program is not None and program.state == "waiting" else next(
            (t for t in infos if t.state == "waiting"), None)
        if start is None:
            return "Nothing can move, but no thread is waiting on anything." + _hint(engine)
        what = start.waiting_for
        inside = current_node(history, start.name)
        where = f" (inside {inside})" if inside else ""
        text = (f"Deadlock: {start.name}{where} waits on {what}, and no other thread can "
                "ever wake it: none is running a node and no task is queued for it.")
        state = history.latest()
        owner = {gid: gt.owner for gid, gt in state.graph_tasks.items()}
        completed = {e.graph_task: e.thread for e in list(history.events)
                     if e.kind == "completion"}
        done = [(gid, thr) for gid, thr in sorted(completed.items()) if thr != owner.get(gid)]
        for gid, thr in done:
            text += (f" GraphTask {gid} completed on {thr}, not on its owner "
                     f"{owner.get(gid)}, and no wake-up task was pushed to the "
                     "owner's queue.")
        return text + _hint(engine)
    hops = []
    n = len(cycle)
    for i in range(n):
        u, v = cycle[i], cycle[(i + 1) % n]
        hops.append(_hop(history, g, u, v))
    return "Deadlock: " + "; ".join(hops) + ". No thread in this cycle can move." + \
        _hint(engine)

def _hop(history: History, g: nx.DiGraph, u: str, v: str) -> str:
    su, sv = u.split(" ", 1), v.split(" ", 1)
    ku, nu = su[0], su[1]
    kv, nv = sv[0], sv[1]
    if ku == "thread":
        node = current_node(history, nu)
        inside = f" (inside {node})" if node else ""
        if kv == "future":
            return f"{nu}{inside} waits on the future of {nv}"
        if kv == "queue":
            return f"{nu}{inside} waits on queue {nv}"
        return f"{nu}{inside} waits on {kv} '{nv}'"
    if ku == "future":
        if kv == "queue":
            state = history.latest()
            tasks = [state.node_name(t[1]) for t in state.queue_order(nv)
                     if f"GraphTask {t[0]}" == nu]
            what = f"{nu}'s next task ({tasks[0]})" if tasks else f"{nu}'s next task"
            return f"{what} sits in queue {nv}"
        if kv == "thread":
            return f"{nu} still has a node running on {nv}"
        return f"{nu} waits in the reentrant pool's queue for a free pool thread"
    if ku == "queue":
        why = g.edges[u, v].get("why")
        if why == "pops":
            return f"queue {nu} is popped by {nv}"
        return f"only {nv}, blocked inside a node, could push to queue {nu}"
    if ku == "lock":
        return f"lock '{nu}' is held by {nv}"
    if ku == "signal":
        if kv == "queue":
            return (f"signal '{nu}' can only be set by {nv}, whose thread has not started: "
                    f"it starts with the first task pushed to queue {nv}")
        return f"signal '{nu}' can only be set by {nv}"
    if ku == "reentrant":
        return f"every pool thread is busy ({nv} among them) and the pool may not grow"
    return f"{u} -> {v}"

def _hint(engine: Engine) -> str:
    o = engine.options()
    if o["reentrant"] == "block":
        return (" (engine option reentrant='block': PyTorch's fix is to run the nested "
                "backward on the waiting thread, a nested thread_main.)")
    if not o["wake_owner"]:
        return (" (engine option wake_owner=False: PyTorch pushes a dummy task to the "
                "owner's queue when another thread completes the GraphTask.)")
    if not o["depth_priority"]:
        return (" (engine option depth_priority=False: PyTorch's ReadyQueue runs deeper "
                "reentrant tasks first, so a nested backward never picks up its parent's "
                "work.)")
    if o["reentrant_pool_size"] is not None:
        return (f" (engine option reentrant_pool_size={o['reentrant_pool_size']}: "
                "PyTorch's pool grows a thread whenever no worker is idle.)")
    return ""
