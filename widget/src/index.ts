export { SvcChat, type SvcChatProps } from "./SvcChat";
export { ask, fetchConfiguration, SvcChatError, type AskOptions, type Target } from "./api";
export { mount, type ChatHandle, type ChatOptions } from "./chat";
export type {
  Answer,
  AnswerSource,
  Appearance,
  ConfigurationOverride,
  Language,
  SvcChatErrorInfo,
  WidgetConfiguration,
} from "./types";
