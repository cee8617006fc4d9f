/**
 * A file descriptor owned by one object (a netlink socket, an open netns): closed exactly
 * once, by `close()` or at the end of a `using` block.
 *
 * @module
 */
import { libc } from "../base/libc.ts";

/** An object that owns the file descriptor `fd` and closes it once. */
export abstract class OwnedFd implements Disposable {
  /** The file descriptor. */
  readonly fd: number;
  #closed = false;

  /** Takes ownership of `fd`. */
  protected constructor(fd: number) {
    this.fd = fd;
  }

  /** True once the descriptor has been closed. */
  protected get closed(): boolean {
    return this.#closed;
  }

  /** Closes the descriptor (idempotent). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    libc().close(this.fd);
  }

  /** Closes on `using`. */
  [Symbol.dispose](): void {
    this.close();
  }
}
