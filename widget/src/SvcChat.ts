import { createElement, useEffect, useRef } from "react";
import { type ChatHandle, type ChatOptions, mount } from "./chat";

export interface SvcChatProps extends Omit<ChatOptions, "fetchConfiguration"> {
  /** Class of the host element (for placing an inline Widget). */
  className?: string;
}

/** The svc chat Widget. Server rendering outputs only its empty host element;
 * everything else happens in the browser, in an effect, inside a shadow root. */
export function SvcChat(props: SvcChatProps) {
  const host = useRef<HTMLDivElement>(null);
  const chat = useRef<ChatHandle | null>(null);
  const { embedId, baseUrl, display, nonce } = props;
  useEffect(() => {
    if (!host.current) return;
    const handle = mount(host.current, props);
    chat.current = handle;
    return () => {
      handle.destroy();
      chat.current = null;
    };
    // A new Agent, service, display or nonce is a new Widget; the rest updates it.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [embedId, baseUrl, display, nonce]);
  useEffect(() => {
    chat.current?.update(props);
  });
  return createElement("div", { ref: host, className: props.className, "data-svc-chat": "" });
}
