public import LibPQ
public import Testing

/// A test that fails on a database error shows the server's message, not only
/// its kind: the product's `description` leaves the message out because it can
/// quote a value, which a test's own data never needs hiding from.
extension PostgresError: CustomTestStringConvertible {
    public var testDescription: String { debugDescription }
}
