/// The one place where the connection's bytes are framed and unframed. Plain until a security
/// method agrees keys (RSA-AES); from then on every byte received is opened and every byte sent
/// is sealed here, so no handshake step or session message handles frames itself.
struct RecordLayerStage: Sendable {
    private var layer: RA2RecordLayer?
    /// Output is sealed into frames.
    private(set) var sealsOutput = false

    /// Input passes through the record layer.
    var opensInput: Bool { layer != nil }

    /// From now on, both directions are framed with `layer`.
    mutating func begin(_ layer: RA2RecordLayer) {
        self.layer = layer
        sealsOutput = true
    }

    /// Output goes back to plain text (the RSA-AES "ne" types after the credentials). The layer
    /// goes once the server's side is plain too.
    mutating func endOutputFraming() {
        sealsOutput = false
        if layer?.receivesPlain == true { layer = nil }
    }

    mutating func outbound(_ bytes: [UInt8]) -> [UInt8] {
        guard sealsOutput, var current = layer else { return bytes }
        layer = nil     // keep the layer's buffers uniquely referenced while it works
        let sealed = current.seal(bytes)
        layer = current
        return sealed
    }

    /// The plaintext of `bytes` (a frame's worth may stay buffered until its end arrives).
    mutating func inbound(_ bytes: some Collection<UInt8>) throws(RFBError) -> [UInt8] {
        guard var current = layer else { return Array(bytes) }
        layer = nil
        let plaintext = try current.open(bytes)
        if sealsOutput || !current.receivesPlain { layer = current }
        return plaintext
    }
}

/// What one call into `RFBConnection` produces, in order. Bytes to send pass through the
/// record-layer stage as they are produced, so a message is sealed exactly when it is queued —
/// the order of `actions` is the order on the wire.
struct ConnectionOutput: Sendable {
    private(set) var actions: [RFBConnection.Action] = []
    private(set) var stage: RecordLayerStage

    init(stage: RecordLayerStage) {
        self.stage = stage
    }

    mutating func send(_ bytes: [UInt8]) {
        actions.append(.send(stage.outbound(bytes)))
    }

    mutating func append(_ action: RFBConnection.Action) {
        actions.append(action)
    }

    /// Keys are agreed: frame everything from here, both ways (the connection re-reads any
    /// input already buffered past this point through the layer).
    mutating func beginRecordLayer(_ layer: RA2RecordLayer) {
        stage.begin(layer)
    }

    mutating func endOutputFraming() {
        stage.endOutputFraming()
    }

    mutating func open(_ bytes: some Collection<UInt8>) throws(RFBError) -> [UInt8] {
        try stage.inbound(bytes)
    }
}
