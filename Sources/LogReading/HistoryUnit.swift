/// Whose timeline a history is: a person's, named by their id, or a
/// group's, named by its id behind a unit separator, which no id a message
/// carries begins with, so the two never meet in one key space.
package enum HistoryUnit {
    /// The timeline key of `group`.
    package static func unit(of group: String) -> String { "\u{1F}" + group }

    /// Whether `unit` names a group's timeline.
    package static func isGroup(_ unit: String) -> Bool { unit.utf8.first == 0x1F }
}
