/// A DualSense output effect as SDL's `SDL_GameControllerSendEffect` takes it for that pad: the
/// controller's 47-byte effects block (its output report without the report id), where only the
/// sections whose enable bit is set change anything on the pad.
///
/// Layout (the controller's, as SDL's PS5 driver documents it): byte 0 enable bits (0x04 right
/// trigger, 0x08 left trigger), byte 1 enable bits (0x10 player indicator), bytes 10…20 the right
/// trigger's mode and ten parameters, 21…31 the left trigger's, 43 the player LEDs (5 bits).
struct DualSenseEffect: Equatable {
    static let size = 47
    private(set) var bytes = [UInt8](repeating: 0, count: DualSenseEffect.size)

    /// The player indicator: LEDs left to right as bits 0…4.
    mutating func playerLights(_ bits: UInt8) {
        bytes[1] |= 0x10
        bytes[43] = bits & 0x1F
    }

    /// An adaptive-trigger block (mode byte and up to ten parameters; missing ones are zero).
    mutating func trigger(right: Bool, _ block: [UInt8]) {
        bytes[0] |= right ? 0x04 : 0x08
        let base = right ? 10 : 21
        for i in 0..<11 { bytes[base + i] = i < block.count ? block[i] : 0 }
    }
}

#if canImport(CSDL2)
import CSDL2

extension DualSenseEffect {
    func send(to controller: OpaquePointer) {
        _ = bytes.withUnsafeBytes { SDL_GameControllerSendEffect(controller, $0.baseAddress, Int32($0.count)) }
    }
}
#endif
