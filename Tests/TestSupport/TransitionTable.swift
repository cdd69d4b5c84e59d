import Testing

/// What one event does in one state: the action and the state after it (nil: unchanged), or
/// nothing at all, because it cannot happen there (a precondition failure).
public enum Transition<Action: Equatable & Sendable, State: Equatable & Sendable>: Sendable {
    case to(Action, State?)
    case impossible
}

/// One state × one event of a state machine's table.
public struct TransitionRow<Setup: RawRepresentable<String> & Sendable, Event: RawRepresentable<String> & Sendable,
                     Action: Equatable & Sendable, State: Equatable & Sendable>: Sendable, CustomTestStringConvertible {
    public var setup: Setup
    public var event: Event
    public var transition: Transition<Action, State>
    public init(setup: Setup, event: Event, transition: Transition<Action, State>) {
        self.setup = setup
        self.event = event
        self.transition = transition
    }
    public var testDescription: String { "\(setup.rawValue) × \(event.rawValue)" }
}

/// A state machine's every state against its every event, for the table tests: how to reach
/// each state (`Setup`), how to feed each event, and the table of what follows.
public protocol TransitionTable {
    associatedtype Machine
    associatedtype Action: Equatable & Sendable
    associatedtype MachineState: Equatable & Sendable
    associatedtype Setup: RawRepresentable<String> & CaseIterable & Hashable & Sendable
    associatedtype Event: RawRepresentable<String> & CaseIterable & Hashable & Sendable
    typealias Row = TransitionRow<Setup, Event, Action, MachineState>

    static func make(_ setup: Setup) -> Machine
    static func apply(_ event: Event, to machine: inout Machine) -> Action
    static func state(of machine: Machine) -> MachineState
    /// What each event does in each state.
    static var table: [Row] { get }
}

public extension TransitionTable {
    /// Rows from each state's list of events.
    static func rows(_ transitions: [(Setup, [(Event, Transition<Action, MachineState>)])]) -> [Row] {
        transitions.flatMap { setup, events in events.map { Row(setup: setup, event: $0.0, transition: $0.1) } }
    }
    static var possible: [Row] { table.filter { if case .to = $0.transition { true } else { false } } }
    static var impossible: [Row] { table.filter { if case .impossible = $0.transition { true } else { false } } }

    /// Expects the table to hold every state × every event once.
    static func expectExhaustive(sourceLocation: SourceLocation = #_sourceLocation) {
        let rows = table
        for setup in Setup.allCases {
            for event in Event.allCases {
                #expect(rows.count { $0.setup == setup && $0.event == event } == 1, "\(setup.rawValue) × \(event.rawValue)", sourceLocation: sourceLocation)
            }
        }
    }

    /// Expects `row`'s event to lead to its action and state.
    static func expect(_ row: Row, sourceLocation: SourceLocation = #_sourceLocation) {
        guard case .to(let action, let next) = row.transition else { return }
        var machine = make(row.setup)
        let before = state(of: machine)
        #expect(apply(row.event, to: &machine) == action, sourceLocation: sourceLocation)
        #expect(state(of: machine) == (next ?? before), sourceLocation: sourceLocation)
    }
}
