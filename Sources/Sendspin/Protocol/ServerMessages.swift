/// The server's messages that mean the same on both wires — clock answers, stream control,
/// group and state updates, player commands — read into the events they report.
enum ServerMessages {
    /// The events for a message of `type`, or nil when `type` is not one of these (the core
    /// decides what it means); a body that does not decode throws. `artwork`: the client took
    /// the artwork role (its stream's start and end are reported).
    static func events(type: String, body: [UInt8], at time: Int64, artwork: Bool = false) throws -> [SendspinEvent]? {
        switch type {
        case "server/time":
            return [.serverTime(try WireJSON.decode(ServerTime.self, from: body), receivedAt: time)]
        case "stream/start":
            let start = try WireJSON.decode(StreamStart.self, from: body)
            return [.streamStart(start.player)] + (artwork ? start.artwork.map { [.artworkStream($0.channels)] } ?? [] : [])
        case "stream/clear":
            return concerns("player", body) ? [.streamClear] : []
        case "stream/end":
            return (concerns("player", body) ? [.streamEnd] : []) + (artwork && concerns("artwork", body) ? [.artworkEnded] : [])
        case "group/update":
            return [.groupUpdate(try WireJSON.decode(GroupUpdate.self, from: body))]
        case "server/state":
            let state = try WireJSON.decode(ServerState.self, from: body)
            return [state.metadata.map(SendspinEvent.metadata), state.controller.map(SendspinEvent.controller)].compactMap { $0 }
        case "server/command":
            return try WireJSON.decode(ServerCommand.self, from: body).player.map { [.playerCommand($0)] } ?? []
        default:
            return nil
        }
    }

    /// stream/clear and stream/end name the roles they apply to; none named (or a body that
    /// does not say) means all of them.
    private static func concerns(_ role: String, _ body: [UInt8]) -> Bool {
        (try? WireJSON.decode(StreamRoles.self, from: body).roles).map { $0?.contains(role) ?? true } ?? true
    }
}
