/// Creates the client's own unstructured tasks, preferring the task executor the client was
/// given (SE-0417): an unstructured `Task {}` does not inherit a caller's executor preference, so
/// every task the SDK creates goes through here. With no executor it is a plain `Task {}`.
struct SDKTaskSpawner: Sendable {
    /// The preferred executor, stored untyped so the type stays usable before macOS 15 / iOS 18;
    /// always an `any TaskExecutor` when set.
    private let executor: (any Sendable)?

    init(executor: (any Sendable)?) { self.executor = executor }

    /// Starts `operation` in a new unstructured task that prefers the executor, if any.
    @discardableResult
    func spawn(_ operation: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
        spawn(returning: operation)
    }

    /// ``spawn(_:)`` for a task with a result.
    func spawn<Success: Sendable>(returning operation: @escaping @Sendable () async -> Success) -> Task<Success, Never> {
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, *), let executor = executor as? any TaskExecutor {
            return Task(executorPreference: executor, operation: operation)
        }
        return Task(operation: operation)
    }
}
