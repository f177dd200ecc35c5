#pragma once
// agentbox-init --zygote: serve CloneInit requests (box/messages.hpp) on sock until it closes
// (see box/zygote.hpp). Each clone's child becomes that box's init (init_in_place.hpp) and
// starts on the request's StartBox; the reply, Cloned, carries its pidfd.
namespace agentbox::init {

int run_zygote(int sock);

}  // namespace agentbox::init
