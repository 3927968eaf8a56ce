// lib/protocol/message_sink.h: where an engine puts the messages it wants sent.
//
// Engines are pure: they never touch a transport. The caller (runtime,
// simulator, test) implements MessageSink and decides where a message goes:
// a worker's gradients go toward its PS, a PS's parameter packets are
// multicast to every worker of the message's job.
#ifndef ATP_LIB_PROTOCOL_MESSAGE_SINK_H_
#define ATP_LIB_PROTOCOL_MESSAGE_SINK_H_

#include "atp/wire.h"

namespace atp::protocol {

class MessageSink {
 public:
  virtual ~MessageSink() = default;
  // Send: called synchronously from inside the engine; `message` is only valid
  // during the call (copy it to keep it). Must not call back into the engine.
  virtual void Send(const wire::AtpMessage& message) = 0;
};

}  // namespace atp::protocol

#endif  // ATP_LIB_PROTOCOL_MESSAGE_SINK_H_
